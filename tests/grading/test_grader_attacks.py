"""Attacks on the grader itself (not on the tests): each student below attacks the root process
that starts the sandbox, reads its replies and writes files, the gradebook and the feedback.

One batch, through the command instructors run (``python -m rlhf_course.grading grade``), with a
correct canary and a correct bystander whose files are the attacks' targets.  The canary keeps its
44/44 on the tests and its feedback, nobody else's files change, nothing is left on the host, the grader's
memory stays bounded, and the batch completes with a report.
"""
from __future__ import annotations

import csv
import hashlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from rlhf_course import ASSIGNMENT, NOTEBOOK
from rlhf_course.grading import examples
from rlhf_course.course.settings import Course

from tests.support.course import (cell_points, copy_course, gradebook_url, leftover_sandbox_processes, needs_sandbox,
                                  release_course)
from tests.support.submissions import PACKAGE_PROBE, add_cells, tree_digest

pytestmark = [pytest.mark.slow, needs_sandbox]

CANARY, BYSTANDER = "ab_canary_correct", "bystander_correct"  # the canary second in order of name: see SLOW
SLOW = "a_slow_calls_and_busy_forks"  # first in order of name
BUDGET_SECONDS = 10  # 6x the slowest other attack here alone (1.6 s: the canary, beside the busy forks); 20 s
# before the zygote, when another attack took 8.9 s in a loaded CI run (3.9 s alone): the batch waits for it
BUSY_SECONDS = 3  # how long the busy forks spin (a core, their cgroup's quota): the canary's grading, about 2 s
GRADER_PEAK_MB = 1500  # measured about 700 MB: torch, nbconvert and the judges

# Hashes of the inputs of every call, written by the recording student; the test computes the same.
_HASH = ("hashlib.sha256(repr([a.double().flatten().tolist() if isinstance(a, torch.Tensor) else float(a) "
         "for a in args]).encode()).hexdigest()[:16]")


def _input_hash(args) -> str:
    import torch  # noqa: F401 - used by the expression
    return eval(_HASH, {"hashlib": hashlib, "torch": torch, "args": args})


def _attacks(course: Path) -> dict[str, dict]:
    """student -> {"answers": {grade_id: source}, "extra": [(cell_type, source)], "tamper": callable}"""
    bystander_nb = course / "submitted" / BYSTANDER / ASSIGNMENT / NOTEBOOK
    source_nb = course / "source" / ASSIGNMENT / NOTEBOOK
    course_handle = Course.at(course)
    ref = examples.answers_for(course_handle, ())
    guide_bug = examples.answers_for(course_handle, ("ppo_clip_without_min",))["ppo_answer"]
    return {
        # 1. Root must never write through a link the student planted where the grader writes.
        "plants_job_symlink": {
            "answers": {**ref, "ppo_answer": ref["ppo_answer"] + f'''
import os
for name in ("/submission/job.json", "/submission/executed.ipynb"):
    try:
        os.remove(name)
    except OSError:
        pass
    try:
        os.symlink({str(bystander_nb)!r}, name)
    except OSError:
        pass
''', "dpo_answer": '''
import os

def dpo_loss(log_p_w, log_p_l, ref_log_p_w, ref_log_p_l, beta=0.1):
    os._exit(0)  # forces the grader to restart the sandbox
'''},
            "tamper": lambda folder: os.symlink(str(bystander_nb), folder / "job.json"),
        },
        # 2. Root must never read a host path the student names, into the student's feedback;
        #    a forged "done" frame on every descriptor the student can reach.
        "feedback_symlink_and_forged_frames": {
            "answers": {**ref, "ppo_answer": guide_bug},
            "extra": [("code", f'''
import os, struct
try:
    os.listdir(f"/proc/{{os.getppid()}}/fd")
    reachable = True
except OSError:
    reachable = False
print("supervisor descriptors reachable:", reachable)
for name in ("executed.ipynb", {NOTEBOOK!r}):
    try:
        os.remove(name)
    except OSError:
        pass
    try:
        os.symlink({str(source_nb)!r}, name)
    except OSError:
        pass
forged = b"N" + b'{{"cells": [], "metadata": {{}}, "nbformat": 4, "nbformat_minor": 5}}'
frame = struct.pack("<Q", len(forged)) + forged
targets = [f"/proc/{{p}}/fd/{{fd}}" for p in os.listdir("/proc") if p.isdigit() and p != str(os.getpid())
           for fd in (os.listdir(f"/proc/{{p}}/fd") if os.access(f"/proc/{{p}}/fd", os.R_OK) else [])]
reached = 0
for path in targets:
    try:
        with open(path, "wb") as handle:
            handle.write(frame); reached += 1
    except OSError:
        pass
print("forged frames written:", reached)
''')],
        },
        # 3. Memory exhaustion through the protocol: a 1 TiB length header and a deflate bomb.
        "protocol_bombs": {
            "answers": {**ref, "gae_answer": ref["gae_answer"] + '''
import io, os, struct, zipfile
_buffer = io.BytesIO()
torch.save({"value": torch.zeros(2**22)}, _buffer)
_bomb = io.BytesIO()
with zipfile.ZipFile(io.BytesIO(_buffer.getvalue())) as _src, zipfile.ZipFile(_bomb, "w", zipfile.ZIP_DEFLATED) as _dst:
    for _item in _src.infolist():
        _dst.writestr(_item.filename, _src.read(_item.filename))
for _fd in range(3, 256):
    for _frame in (struct.pack("<Q", 2**40), struct.pack("<Q", len(_bomb.getvalue()) + 1) + b"O" + _bomb.getvalue()):
        try:
            os.write(_fd, _frame)
        except OSError:
            pass
'''},
        },
        # 4. Disk: fill the writable folders and nest 2000 directories.
        "fills_disk_and_nests_folders": {
            "answers": {**ref, "gae_answer": ref["gae_answer"] + '''
import os
for _folder in ("/submission", "/tmp"):
    try:
        with open(os.path.join(_folder, "fill"), "wb") as _handle:
            while True:
                _handle.write(b"x" * 2**20)
    except OSError:
        pass
_path = "/submission"
try:
    for _ in range(2000):
        _path = os.path.join(_path, "d")
        os.mkdir(_path)
except OSError:
    pass
'''},
        },
        # 5. A value the judges cannot compute with.
        "returns_meta_tensor": {
            "answers": {**ref, "dpo_answer": '''
def dpo_loss(log_p_w, log_p_l, ref_log_p_w, ref_log_p_l, beta=0.1):
    return torch.empty(log_p_w.shape, device="meta")
'''},
        },
        # 6. No total budget: slow calls and busy processes.  Named to be graded first (the grader takes the
        #    students in order of name): its budget runs beside the others' grading rather than after it, alone,
        #    at the end of the batch.  Its busy forks spin while the canary, second in order of name, is graded by
        #    the other worker from the batch's start: for BUSY_SECONDS (the canary's grading takes about 2), then
        #    sleep until the budget ends them: a spinning core is the suite's CPU, and the budget ends sleeping and
        #    spinning processes alike.
        SLOW: {
            "answers": {**ref, "ppo_answer": ref["ppo_answer"] + f'''
import os, time
_busy_until = time.monotonic() + {BUSY_SECONDS}
for _ in range(58):
    try:
        if os.fork() == 0:
            while time.monotonic() < _busy_until:
                pass
            while True:
                time.sleep(1)
    except OSError:
        break
_reference_ppo = ppo_clipped_objective

def ppo_clipped_objective(ratio, advantage, clip_epsilon=0.2):
    time.sleep(0.25)  # each call far below its limit (4 s), the feedback run too (about 3 s of 10): the budget
    # ends the submission among its checks, not in its feedback run
    return _reference_ppo(ratio, advantage, clip_epsilon)
'''},
        },
        # 7. Notebooks that would stall rendering.
        "forty_thousand_cells": {"answers": ref, "extra": [("markdown", "x " * 100)] * 40000},
        "huge_notebook": {"answers": ref, "extra": [("markdown", "y" * (20 * 2**20))]},
        # 8. Escapes in the terminal and CSV; scripts in the feedback page.
        "ansi_and_scripts": {
            "answers": {**ref, "gae_answer": ref["gae_answer"] + '''
import os, sys
_reference_gae = compute_gae

def compute_gae(rewards, values, next_value=0.0, gamma=0.99, gae_lambda=0.95):
    if rewards.numel() != 5:  # the visible test still runs: the feedback page has content
        sys.stderr.write("\\x1b[30;40m" * 40 + "\\x1b]0;pwned\\x07")
        sys.stderr.flush()
        os._exit(3)
    return _reference_gae(rewards, values, next_value, gamma, gae_lambda)
'''},
            "extra": [("markdown", '<script>alert("markdown-script")</script><img src=x onerror="alert(1)">'),
                      ("code", 'from IPython.display import HTML, display\n'
                               'display(HTML(\'<script>alert("output-script")</script><img src=y onerror="alert(2)">\'))')],
        },
        # 9. Record every call's inputs and print them in a last cell, into the student's own feedback.
        "records_hidden_inputs": {
            "answers": {gid: ref[gid] + f'''
import hashlib
_SEEN = globals().setdefault("_SEEN", [])
_original_{gid} = {name}

def {name}(*args):
    key = {_HASH}
    _SEEN.append(key)
    with open("/submission/calls.txt", "a") as handle:
        handle.write("CALL " + key + "\\n")
    return _original_{gid}(*args)
''' for gid, name in (("ppo_answer", "ppo_clipped_objective"), ("dpo_answer", "dpo_loss"),
                        ("gae_answer", "compute_gae"))},
            "extra": [("code", 'print(open("/submission/calls.txt").read())\nprint(" ".join("CALL " + k for k in _SEEN))')],
        },
    }


def _host_scratch() -> set[str]:
    return {p.name for p in Path(tempfile.gettempdir()).iterdir()}


@pytest.fixture(scope="module")
def attacked(tmp_path_factory):
    course = copy_course(tmp_path_factory.mktemp("attacks") / "course")
    release_course(course)
    course_handle = Course.at(course)
    for student in (CANARY, BYSTANDER):
        examples.write_submission(course_handle, student, examples.answers_for(course_handle, ()))
    # The bystander also says which package its sandbox imported (tests/grading/test_course_elsewhere.py: the
    # grader installed as a wheel, run from the course root; here the environment's editable install, run from
    # another folder than the course's).
    add_cells(course / "submitted" / BYSTANDER / ASSIGNMENT / NOTEBOOK, [("code", PACKAGE_PROBE)])
    attacks = _attacks(course)
    for student, attack in attacks.items():
        folder = examples.write_submission(course_handle, student, attack["answers"])
        if attack.get("extra"):
            add_cells(folder / NOTEBOOK, attack["extra"])
        if attack.get("tamper"):
            attack["tamper"](folder)
    before, scratch_before = tree_digest(course), _host_scratch()
    disk_before = shutil.disk_usage(course).free
    proc = subprocess.run([sys.executable, "-m", "rlhf_course.grading", "grade", "--course-root", str(course),
                           "--workers", "2", "--call-seconds", "4", "--feedback-seconds", "20",
                           "--submission-seconds", str(BUDGET_SECONDS)],
                          capture_output=True, text=True, timeout=900, cwd=tmp_path_factory.mktemp("elsewhere"))
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    with open(course / "grading_report.csv") as handle:
        report = {row["student"]: row for row in csv.DictReader(handle)}
    return {"course": course, "proc": proc, "report": report, "before": before, "attacks": attacks,
            "scratch_before": scratch_before, "disk_before": disk_before}


def _feedback(course: Path, student: str) -> str:
    return (course / "feedback" / student / ASSIGNMENT / "rlhf_building_blocks.html").read_text()


def test_the_batch_completes_and_the_canary_is_intact(attacked):
    course, report = attacked["course"], attacked["report"]
    assert set(report) == {CANARY, BYSTANDER, *attacked["attacks"]}
    for student in (CANARY, BYSTANDER):
        assert report[student]["state"] == "graded" and float(report[student]["score"]) == 44.0, report[student]
        assert "rlhf: 44 / 50" in _feedback(course, student) and "Tests: 44 / 44" in _feedback(course, student)
        assert examples.cell_scores(gradebook_url(course), student)
    assert sorted(report)[:2] == [SLOW, CANARY]  # graded first and second: its forks spin while the canary is graded
    assert float(report[CANARY]["seconds"]) < 20, report[CANARY]  # busy neighbours did not slow it


def test_the_sandbox_imports_the_graders_package_whatever_the_folder(attacked):
    """The grader run from a folder that is not the course's, from the environment's editable install: its
    sandbox imports the copy of the package the grader runs (the wheel's case: test_course_elsewhere.py)."""
    page = _feedback(attacked["course"], BYSTANDER)
    assert "sandbox package: /opt/rlhf-grader/rlhf_course/__init__.py" in page
    assert "marker: False" in page  # the editable checkout's package has no marker module; the wheel's has


def test_no_file_outside_the_grader_outputs_changed_and_nothing_left_on_the_host(attacked):
    assert tree_digest(attacked["course"]) == attacked["before"]
    assert not {n for n in _host_scratch() - attacked["scratch_before"] if n.startswith("grade-")}
    # Unbounded, the disk filler writes about 0.27 GB/s for its whole budget: tens of GB.  The bound
    # leaves room for other jobs writing to a shared machine meanwhile.
    assert attacked["disk_before"] - shutil.disk_usage(attacked["course"]).free < 2 * 2**30
    assert leftover_sandbox_processes() == {}


def test_grader_memory_stays_bounded(attacked):
    peak = float(re.search(r"grader peak memory: (\d+) MB", attacked["proc"].stdout).group(1))
    assert peak < GRADER_PEAK_MB, peak


def _points(repo, function=None, wrong=None) -> float:
    sys.path.insert(0, str(repo / "instructor"))
    import rlhf_catalogue
    import rlhf_hidden_checks as checks
    points = cell_points(ASSIGNMENT, repo)
    if wrong:
        return sum(points[g] for g in rlhf_catalogue.WRONG_BY_NAME[wrong].loses)
    return sum(points[c.id] for c in checks.CHECKS.values() if c.function == function)


def test_planted_symlinks_write_nothing(attacked, repo):
    row = attacked["report"]["plants_job_symlink"]
    assert row["state"] == "crashed" and float(row["score"]) == 44 - _points(repo, "dpo_loss"), row


def test_feedback_never_shows_a_host_file(attacked, repo):
    course = attacked["course"]
    row = attacked["report"]["feedback_symlink_and_forged_frames"]
    assert row["state"] == "failed tests", row
    assert float(row["score"]) == 44 - _points(repo, wrong="ppo_clip_without_min"), row  # the guide's PPO slip
    page = _feedback(course, "feedback_symlink_and_forged_frames")
    autograded = (course / "autograded" / "feedback_symlink_and_forged_frames" / ASSIGNMENT / NOTEBOOK).read_text()
    for text in (page, autograded):
        assert "BEGIN SOLUTION" not in text and "BEGIN HIDDEN TESTS" not in text and "run_check" not in text
    # the supervisor's protocol pipes were out of the student's reach
    assert "supervisor descriptors reachable: False" in page and "forged frames written: 0" in page
    assert row["review_flags"]


def test_protocol_and_disk_attacks_reach_nothing(attacked):
    row = attacked["report"]["fills_disk_and_nests_folders"]
    assert row["state"] == "graded" and float(row["score"]) == 44, row
    # The bombs can only reach the student's own pipe to the supervisor, which refuses the 1 TiB
    # frame: the student's own functions are lost, the grader is not.
    row = attacked["report"]["protocol_bombs"]
    assert row["state"] == "crashed" and float(row["score"]) == 0, row


def test_an_unusable_value_fails_its_checks_and_never_breaks_the_grader(attacked, repo):
    row = attacked["report"]["returns_meta_tensor"]
    assert row["state"] == "failed tests" and float(row["score"]) == 44 - _points(repo, "dpo_loss"), row
    cells = examples.cell_scores(gradebook_url(attacked["course"]), "returns_meta_tensor")
    cells = {g: c for g, c in cells.items() if not g.startswith("lab_question_")}  # written answers: a person's
    assert {g for g, c in cells.items() if c.score < c.max_score} == {g for g in cells if g.startswith("dpo")}


def test_the_submission_budget_ends_slow_submissions(attacked):
    row = attacked["report"][SLOW]
    assert row["state"] == "timed out" and "total time budget" in row["detail"], row
    assert float(row["seconds"]) < BUDGET_SECONDS + 15, row


def test_oversized_notebooks_are_refused_quickly(attacked):
    for student in ("forty_thousand_cells", "huge_notebook"):
        row = attacked["report"][student]
        assert row["state"] == "too large" and float(row["score"]) == 0, row
        assert float(row["seconds"]) < 10, row


def test_no_control_characters_in_the_table_or_report_and_no_scripts_in_feedback(attacked):
    row = attacked["report"]["ansi_and_scripts"]
    assert row["state"] == "crashed", row
    assert "\x1b" not in attacked["proc"].stdout and "\x07" not in attacked["proc"].stdout
    assert "\x1b" not in (attacked["course"] / "grading_report.csv").read_text()
    page = _feedback(attacked["course"], "ansi_and_scripts")
    # What the student wrote may be shown as text (escaped), never as live markup.
    assert not re.search(r"<script[^>]*>\s*alert", page), "a student's script reached the page"
    assert not re.search(r"<[a-z]+[^>]*\sonerror\s*=", page), "a student's event handler reached the page"
    assert "markdown-script" in page or "output-script" in page  # escaped or dropped, not lost silently
    assert "GAE advantages:" in page  # the rest of the student's notebook is still shown


def test_feedback_never_shows_hidden_inputs(attacked, repo):
    sys.path.insert(0, str(repo / "instructor"))
    import rlhf_hidden_checks as checks
    visible = {_input_hash(case.args) for check in checks.CHECKS.values() if check.visible for case in check.cases()}
    hidden = {_input_hash(case.args) for check in checks.CHECKS.values() if not check.visible
              for case in check.cases()} - visible
    page = _feedback(attacked["course"], "records_hidden_inputs")
    shown = set(re.findall(r"CALL ([0-9a-f]{16})", page))
    assert shown, "the recording student's last cell printed nothing: the attack did not run"
    assert not shown & hidden
    assert attacked["report"]["records_hidden_inputs"]["state"] == "graded"
