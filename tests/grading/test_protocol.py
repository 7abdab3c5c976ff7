"""The grader's side of the sandbox protocol treats every byte that comes back as hostile.
Fast tests, no root: a plain subprocess plays the sandbox."""
from __future__ import annotations

import io
import os
import resource
import subprocess
import sys
import time
import zipfile

import pytest
import torch

from rlhf_course.grading.sandbox import protocol
from rlhf_course.grading.intake import Unreadable, read_submitted_notebook
from rlhf_course.course.limits import Limits
from rlhf_course.grading.sandbox.observe import Case, Observation, from_wire, to_wire
from rlhf_course.grading.gradebook.report import format_table
from rlhf_course.grading.results import MALFORMED, TOO_LARGE, SubmissionResult, printable
from rlhf_course.grading.sandbox.sandbox import ProtocolViolation, Sandbox, SandboxTimeout

CALL = protocol.CALL + b"?"  # any call request: the fake sandboxes below answer whatever is asked
NOTEBOOK = "rlhf_building_blocks.ipynb"


def _fake_sandbox(script: str, limits: Limits = Limits()) -> Sandbox:
    """A Sandbox whose process is ``python -c script`` instead of bwrap (no root needed)."""
    sandbox = Sandbox({}, limits=limits)  # never started: it claims no slot, its kill() touches no uid
    sandbox.process = subprocess.Popen([sys.executable, "-c", script], stdin=subprocess.PIPE,
                                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    return sandbox


def _deflated(data: bytes) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(data)) as src, zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as dst:
        for item in src.infolist():
            dst.writestr(item.filename, src.read(item.filename))
    return out.getvalue()


def _rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def test_an_announced_terabyte_is_refused_before_reading():
    sandbox = _fake_sandbox("import sys, struct, time\n"
                            "sys.stdout.buffer.write(struct.pack('<Q', 2**40)); sys.stdout.flush()\n"
                            "while True: sys.stdout.buffer.write(b'x' * 2**20)\n")
    start, rss = time.monotonic(), _rss_mb()
    with pytest.raises(ProtocolViolation, match="announced a reply of 1099511627776 bytes"):
        sandbox.request(CALL, b"O", 2**20, seconds=30)
    assert time.monotonic() - start < 5 and _rss_mb() - rss < 50
    sandbox.kill()


def test_a_reply_of_the_wrong_kind_is_refused():
    sandbox = _fake_sandbox("import sys, struct\nsys.stdout.buffer.write(struct.pack('<Q', 5) + b'Nabcd')\n"
                            "sys.stdout.flush()\nimport time; time.sleep(30)")
    with pytest.raises(ProtocolViolation, match="expected a reply of kind"):
        sandbox.request(CALL, b"O", 2**20, seconds=30)
    sandbox.kill()


def test_silence_ends_at_the_submission_budget_not_later():
    sandbox = _fake_sandbox("import time; time.sleep(60)", Limits(call_seconds=30))
    sandbox.deadline = time.monotonic() + 1
    with pytest.raises(SandboxTimeout) as caught:
        sandbox.request(CALL, b"O", 2**20, seconds=30)
    assert caught.value.budget == "submission"


def test_a_torch_archive_is_refused_unread_even_a_deflate_bomb():
    buffer = io.BytesIO()
    torch.save({"value": torch.zeros(2**20)}, buffer)
    bomb = _deflated(buffer.getvalue())
    assert len(bomb) < len(buffer.getvalue()) / 100  # a thousand to one, as in the reported attack
    rss = _rss_mb()
    for archive in (buffer.getvalue(), bomb):
        with pytest.raises(ValueError, match="not the plain layout"):
            from_wire(archive, Case((torch.ones(3),)))
    assert _rss_mb() - rss < 20  # nothing was unpacked


def test_the_job_crosses_as_json_and_a_malformed_one_is_refused():
    job = {"setup": "import torch", "answer_cells": {"a": "x = 1"}, "notebook_name": NOTEBOOK,
           "notebook_json": "{}", "notebook_cap": 1, "reply_cap": 2}
    request = protocol.job_request(job)
    assert request[:1] == protocol.JOB and protocol.decode_job(request[1:]) == job
    for broken in ({**job, "extra": 1}, {**job, "reply_cap": "2"}, {k: v for k, v in job.items() if k != "setup"}):
        with pytest.raises(ValueError, match="malformed job"):
            protocol.decode_job(protocol.job_request(broken)[1:])


def test_unusable_tensors_become_wrong_answers_and_malformed_observations_are_refused():
    case = Case((torch.ones(3), torch.ones(3)), grad_wrt=(0,))
    meta = to_wire(Observation(value=torch.empty(3, device="meta"), args_after=case.args))
    observation = from_wire(meta, case)
    assert observation.value is None and "meta" in observation.value_type
    complex_value = to_wire(Observation(value=torch.ones(2, dtype=torch.complex64), args_after=case.args))
    assert from_wire(complex_value, case).value is None
    wrong_grad = to_wire(Observation(value=torch.ones(()), grads={5: torch.ones(3)}, args_after=case.args))
    with pytest.raises(ValueError, match="does not answer the case"):
        from_wire(wrong_grad, case)
    with pytest.raises(ValueError, match="unreadable"):
        from_wire(b"not a pickle", case)
    good = from_wire(to_wire(Observation(value=torch.ones(()), args_after=case.args)), case)
    assert good.value.item() == 1.0


def test_control_characters_never_reach_the_terminal_or_csv():
    evil = "\x1b[30;40mblack\x1b]0;title\x07\r"
    assert "\x1b" not in printable(evil) and "\x07" not in printable(evil) and "black" in printable(evil)
    table = format_table([SubmissionResult(student="s\x1b[8m", state="crashed", detail=evil)])
    assert "\x1b" not in table and "\x07" not in table and "\r" not in table


@pytest.fixture
def submitted(tmp_path):
    folder = tmp_path / "submitted" / "eve" / "rlhf"
    folder.mkdir(parents=True)
    return tmp_path, folder


def test_the_submitted_notebook_is_read_without_following_links(submitted, tmp_path):
    course, folder = submitted
    secret = tmp_path / "secret.ipynb"
    secret.write_text("{}")
    (folder / "rlhf_building_blocks.ipynb").symlink_to(secret)
    with pytest.raises(Unreadable) as caught:
        read_submitted_notebook(course / "submitted" / "eve" / "rlhf", NOTEBOOK, Limits())
    assert caught.value.state == MALFORMED


def test_a_fifo_or_a_huge_file_is_refused(submitted):
    course, folder = submitted
    os.mkfifo(folder / "rlhf_building_blocks.ipynb")
    with pytest.raises(Unreadable, match="regular file"):
        read_submitted_notebook(course / "submitted" / "eve" / "rlhf", NOTEBOOK, Limits())  # and does not block
    os.remove(folder / "rlhf_building_blocks.ipynb")
    with open(folder / "rlhf_building_blocks.ipynb", "wb") as handle:
        handle.truncate(64 * 2**20)
    with pytest.raises(Unreadable) as caught:
        read_submitted_notebook(course / "submitted" / "eve" / "rlhf", NOTEBOOK, Limits())
    assert caught.value.state == TOO_LARGE


def test_a_linked_student_folder_is_refused(submitted, tmp_path):
    course, folder = submitted
    (course / "submitted" / "mallory").symlink_to(course / "submitted" / "eve")
    with pytest.raises(Unreadable, match="symbolic link"):
        read_submitted_notebook(course / "submitted" / "mallory" / "rlhf", NOTEBOOK, Limits())


@pytest.mark.skipif(os.geteuid() != 0, reason="slot locks live in /run (root)")
def test_two_graders_on_one_machine_never_share_a_slot():
    from rlhf_course.grading.sandbox.sandbox import claim_slot
    first, first_fd = claim_slot(7)
    second, second_fd = claim_slot(7)  # another grader (another open file) asks for the same slot
    try:
        assert first == 7 and second != 7
        os.close(first_fd)
        again, again_fd = claim_slot(7)
        assert again == 7
        os.close(again_fd)
    finally:
        os.close(second_fd)
