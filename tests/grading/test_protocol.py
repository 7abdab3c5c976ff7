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

from rlhf_course.grading.feedback import printable
from rlhf_course.grading.report import format_table
from rlhf_course.grading.observe import Case, Observation, from_wire, to_wire
from rlhf_course.grading.sandbox import Limits, ProtocolViolation, Sandbox, SandboxTimeout, check_archive
from rlhf_course.grading.trusted import MALFORMED, TOO_LARGE, SubmissionResult, Unreadable, read_submitted_notebook


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
        sandbox.request({"kind": "call"}, b"O", 2**20, seconds=30)
    assert time.monotonic() - start < 5 and _rss_mb() - rss < 50
    sandbox.kill()


def test_a_reply_of_the_wrong_kind_is_refused():
    sandbox = _fake_sandbox("import sys, struct\nsys.stdout.buffer.write(struct.pack('<Q', 5) + b'Nabcd')\n"
                            "sys.stdout.flush()\nimport time; time.sleep(30)")
    with pytest.raises(ProtocolViolation, match="expected a reply of kind"):
        sandbox.request({"kind": "call"}, b"O", 2**20, seconds=30)
    sandbox.kill()


def test_silence_ends_at_the_submission_budget_not_later():
    sandbox = _fake_sandbox("import time; time.sleep(60)", Limits(call_seconds=30))
    sandbox.deadline = time.monotonic() + 1
    with pytest.raises(SandboxTimeout) as caught:
        sandbox.request({"kind": "call"}, b"O", 2**20, seconds=30)
    assert caught.value.budget == "submission"


def test_compressed_or_oversized_archives_are_refused_before_torch_load():
    buffer = io.BytesIO()
    torch.save({"value": torch.zeros(2**20)}, buffer)
    plain = buffer.getvalue()
    check_archive(plain, 8 * 2**20)  # a plain archive under its cap passes
    bomb = _deflated(plain)
    assert len(bomb) < len(plain) / 100  # a thousand to one, as in the reported attack
    with pytest.raises(ProtocolViolation, match="compressed"):
        check_archive(bomb, 8 * 2**20)
    with pytest.raises(ProtocolViolation, match="more than its cap"):
        check_archive(plain, 2**20)
    with pytest.raises(ProtocolViolation, match="not a torch archive"):
        check_archive(b"garbage", 2**20)


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
    buffer = io.BytesIO()
    torch.save({"value": torch.ones(())}, buffer)
    with pytest.raises(ValueError, match="expected fields"):
        from_wire(buffer.getvalue(), case)
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
        read_submitted_notebook(course, "eve")
    assert caught.value.state == MALFORMED


def test_a_fifo_or_a_huge_file_is_refused(submitted):
    course, folder = submitted
    os.mkfifo(folder / "rlhf_building_blocks.ipynb")
    with pytest.raises(Unreadable, match="regular file"):
        read_submitted_notebook(course, "eve")  # and does not block
    os.remove(folder / "rlhf_building_blocks.ipynb")
    with open(folder / "rlhf_building_blocks.ipynb", "wb") as handle:
        handle.truncate(64 * 2**20)
    with pytest.raises(Unreadable) as caught:
        read_submitted_notebook(course, "eve")
    assert caught.value.state == TOO_LARGE


def test_a_linked_student_folder_is_refused(submitted, tmp_path):
    course, folder = submitted
    (course / "submitted" / "mallory").symlink_to(course / "submitted" / "eve")
    with pytest.raises(Unreadable, match="symbolic link"):
        read_submitted_notebook(course, "mallory")


@pytest.mark.skipif(os.geteuid() != 0, reason="slot locks live in /run (root)")
def test_two_graders_on_one_machine_never_share_a_slot():
    from rlhf_course.grading.sandbox import claim_slot
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
