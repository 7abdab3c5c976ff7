"""Nothing the student's process says after a hidden input entered it reaches the student.

A submission of every assignment, in both editions, exfiltrates each call's inputs through every field of the
observation it sends back (an exception's text, an exception class it names, the type of what it returns, a
``backward`` that raises, a shape made of the inputs' hash, the inputs' own values returned as its answer). The
files the student receives (``feedback/<student>/<assignment>/``) must hold none of the hidden cases, while the
instructor's autograded copy holds them: the channels were used, and only the student's side is closed.
Graded through the in-process sandbox double (no root needed: the observations cross the same wire).
"""
from __future__ import annotations

import hashlib
import re
from pathlib import Path

import pytest
import torch

from rlhf_course.grading import examples, instructor
from rlhf_course.course import notebooks
from rlhf_course.grading.sandbox.sandbox import SandboxDied
from rlhf_course.course.settings import Course
from tests.support.course import copy_course, release_course, repo_course
from tests.support.in_process_sandbox import InProcessSandbox, grade_in_process

ASSIGNMENTS = {"rlhf": "rlhf_building_blocks.ipynb", "kl_penalty": "kl_penalty.ipynb", "grpo": "grpo.ipynb"}
EDITIONS = [(base + suffix, base, notebook) for base, notebook in ASSIGNMENTS.items() for suffix in ("", "_zh")]
STUDENT = "exfiltrates"

# The same hash of a call's inputs in the student's function and in this test.
HASH = ("hashlib.sha256(repr([a.double().flatten().tolist() if isinstance(a, torch.Tensor) else float(a) "
        "for a in args]).encode()).hexdigest()[:16]")

EXFILTRATING_ANSWER = f'''
import hashlib

import torch

class _SaysItInBackward(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, tag):
        ctx.tag = tag
        return x.sum() * 0 + 1.0

    @staticmethod
    def backward(ctx, grad):
        raise ValueError("LEAK " + ctx.tag)


def _exfiltrate(*args, **kwargs):
    tag = {HASH}
    channel = int(tag, 16) % 6
    first = next(a for a in args if isinstance(a, torch.Tensor))
    if channel == 0:
        raise ValueError("LEAK " + tag)
    if channel == 1:
        raise type("Leak_" + tag, (Exception,), {{}})("named for the inputs")
    if channel == 2:
        return type("Leak_" + tag, (), {{}})()
    if channel == 3:
        return _SaysItInBackward.apply(first, tag)
    if channel == 4:
        return torch.empty((0,) + tuple(bytes.fromhex(tag)[:7]))
    return first.detach().clone().double()


ppo_clipped_objective = dpo_loss = compute_gae = kl_estimator_k3 = group_relative_advantages = _exfiltrate
'''


def _hash(args) -> str:
    return eval(HASH, {"hashlib": hashlib, "torch": torch, "args": args})


def _secrets(base: str) -> dict[str, set[str]]:
    """What would give a hidden case away, by channel: its hash, its hash as a shape, its values to 6 digits."""
    checks = instructor.load_module(repo_course(), instructor.checks_module_name(base)).CHECKS.values()
    visible = {_hash(case.args) for check in checks if check.visible for case in check.cases()}
    hidden = [case for check in checks if not check.visible for case in check.cases() if _hash(case.args) not in visible]
    hashes = {_hash(case.args) for case in hidden}
    shapes = {str((0,) + tuple(bytes.fromhex(h)[:7])) for h in hashes}
    values = {f"{v:.6g}" for case in hidden for a in case.args if isinstance(a, torch.Tensor)
              for v in a.double().flatten()[:6].tolist()}
    return {"hash": hashes, "shape": shapes, "value": {v for v in values if len(v.lstrip("-")) >= 7}}


def _found(text: str, secrets: dict[str, set[str]]) -> dict[str, set[str]]:
    found = {"hash": set(re.findall(r"[0-9a-f]{16}", text)) & secrets["hash"],
             "shape": {s for s in secrets["shape"] if s in text},
             "value": set(re.findall(r"-?[0-9][0-9.e+-]{5,}", text)) & secrets["value"]}
    return {channel: hits for channel, hits in found.items() if hits}


def _student_files(course: Path, assignment: str) -> str:
    folder = course / "feedback" / STUDENT / assignment
    return "\n".join(path.read_text(errors="replace") for path in sorted(folder.rglob("*")) if path.is_file())


@pytest.fixture(scope="module")
def exfiltrated(tmp_path_factory):
    course = release_course(copy_course(tmp_path_factory.mktemp("exfiltration") / "course"))
    course_handle = Course.at(course)
    for assignment, base, notebook in EDITIONS:
        answers = notebooks.solution_answers(notebooks.read(course / "source" / base / notebook))
        answers = {gid: EXFILTRATING_ANSWER if "def " in source else source for gid, source in answers.items()}
        examples.write_submission(course_handle, STUDENT, answers, assignment=assignment, notebook=notebook)
    results = {r.assignment: r for r in grade_in_process(course_handle)}
    return course, results


@pytest.mark.parametrize("assignment, base, notebook", EDITIONS)
def test_no_hidden_input_reaches_any_file_the_student_receives(exfiltrated, assignment, base, notebook):
    course, results = exfiltrated
    secrets = _secrets(base)
    assert results[assignment].state == "failed tests"
    student_side = _student_files(course, assignment)
    assert re.search("raised|抛出了", student_side)  # the categories remain
    assert _found(student_side, secrets) == {}
    # The channels were used: the instructor's copy holds what the student's code said.
    instructor_side = (course / "autograded" / STUDENT / assignment / notebook).read_text()
    assert _found(instructor_side, secrets).get("hash")


def test_every_channel_reached_the_instructor(exfiltrated):
    course, _ = exfiltrated
    found: dict[str, set] = {}
    for assignment, base, notebook in EDITIONS:
        for channel, hits in _found((course / "autograded" / STUDENT / assignment / notebook).read_text(),
                                    _secrets(base)).items():
            found.setdefault(channel, set()).update(hits)
    everything = "\n".join((course / "autograded" / STUDENT / a / nb).read_text() for a, _, nb in EDITIONS)
    assert set(found) == {"hash", "shape", "value"}
    assert "Leak_" in everything and "backward() failed" in everything


class _DiesSayingTheInputs(InProcessSandbox):
    """A sandbox whose process dies on every call of dpo_loss after writing the call's inputs to its log."""

    def call(self, function, args, grad_wrt):
        if function == "dpo_loss":
            self.kill()
            raise SandboxDied("the sandbox's process exited", log=f"LEAK {_hash(args)}")
        return super().call(function, args, grad_wrt)

    def send_call(self, request):
        from rlhf_course.grading.sandbox.observe import decode_call
        function, args, grad_wrt = decode_call(request[1:])
        self._replies.append(lambda: self.call(function, args, grad_wrt))

    def receive_call(self, since):
        reply = self._replies.pop(0)
        return reply()


def test_a_dying_process_says_nothing_of_its_log_to_the_student(tmp_path):
    course = release_course(copy_course(tmp_path / "course"))
    course_handle = Course.at(course)
    examples.write_submission(course_handle, STUDENT, examples.answers_for(course_handle, ()))
    result, = grade_in_process(course_handle, sandbox=_DiesSayingTheInputs)
    assert result.state == "crashed"
    assert "LEAK" in result.detail  # the instructor reads the log
    page = _student_files(course, "rlhf")
    assert "LEAK" not in page and "dpo_loss" in page
