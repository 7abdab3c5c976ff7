"""The hub's and the proxy's logs, bounded (rlhf_course/classroom/bounded_log.py): in-process, no hub, under 2 s."""
import os
import shutil
import subprocess
import sys
import time

import pytest

from rlhf_course.classroom.bounded_log import BoundedLog, mark, tail


def run_writing(log: BoundedLog, program: str) -> None:
    """A child whose stdout and stderr are the log's pipe, run to its end, its lines all written."""
    output = log.pipe()
    try:
        child = subprocess.Popen([sys.executable, "-c", program], stdout=output, stderr=subprocess.STDOUT)
    finally:
        os.close(output)
    assert child.wait(timeout=60) == 0
    log.wait(timeout=30)


def test_a_log_past_its_bound_is_set_aside_and_the_two_files_hold_the_newest_lines(tmp_path):
    log = BoundedLog(tmp_path / "hub.log", keep_bytes=10_000, line_bytes=200)
    run_writing(log, "import sys\nfor i in range(1000): print(f'line {i:04d} ' + 'x' * 40)")
    files = sorted(tmp_path.iterdir())
    assert [f.name for f in files] == ["hub.log", "hub.log.1"]
    assert all(f.stat().st_size <= 10_000 for f in files)
    lines = (files[1].read_text() + files[0].read_text()).splitlines()
    numbers = [int(line.split()[1]) for line in lines]
    assert numbers == list(range(numbers[0], 1000)) and numbers[0] > 0  # whole lines, in order, the newest kept
    assert len(numbers) * 51 > 10_000  # more than one file's worth


def test_a_long_line_keeps_its_beginning_and_says_how_much_was_cut(tmp_path):
    log = BoundedLog(tmp_path / "proxy.log", keep_bytes=10_000, line_bytes=200)
    run_writing(log, "import sys\nsys.stdout.write('404 GET /' + 'a' * 100_000 + '\\nnext\\n' + 'b' * 150 + '\\n')")
    lines = (tmp_path / "proxy.log").read_text().splitlines()
    assert lines[0].startswith("404 GET /aaa") and len(lines[0].encode()) <= 200
    assert lines[0].endswith(f"[... {100_009 - 136} bytes cut]")  # 136 bytes kept of 100,009
    assert lines[1:] == ["next", "b" * 150]  # a line under the bound is whole


def test_the_classroom_s_own_lines_join_the_children_s(tmp_path):
    log = BoundedLog(tmp_path / "hub.log", keep_bytes=10_000, line_bytes=200)
    run_writing(log, "print('the hub said this')")
    log.write("\n2026-12-08 00:00:00 the classroom stopped unplanned\nkept: everything")
    assert (tmp_path / "hub.log").read_text() == ("the hub said this\n\n2026-12-08 00:00:00 the classroom stopped "
                                                  "unplanned\nkept: everything\n")


def test_a_line_that_cannot_be_written_is_counted_and_the_child_never_waits(tmp_path):
    folder = tmp_path / "hub"
    folder.mkdir()
    log = BoundedLog(folder / "hub.log", keep_bytes=10_000, line_bytes=200)
    shutil.rmtree(folder)  # as a full disk would, every write fails
    # 2 MB, far past a pipe's 64 KiB; once the keeper has read them all (none left in the pipe, and a moment to drop
    # what it read last), the disk is back and one more line comes
    run_writing(log, f"import fcntl, os, struct, sys, termios, time\n"
                     f"for i in range(20000): print('x' * 100, flush=True)\n"
                     f"unread = lambda: struct.unpack('i', fcntl.ioctl(1, termios.FIONREAD, b'0000'))[0]\n"
                     f"while unread(): time.sleep(0.05)\n"
                     f"time.sleep(2)\nos.mkdir({str(folder)!r})\nprint('back')")
    assert (folder / "hub.log").read_text() == "[20000 lines of this log were lost: the disk was full]\nback\n"


def test_the_classroom_s_own_lines_count_what_they_could_not_write(tmp_path):
    folder = tmp_path / "hub"
    folder.mkdir()
    log = BoundedLog(folder / "hub.log", keep_bytes=10_000, line_bytes=200)
    shutil.rmtree(folder)
    log.write("lost\nlost too")
    assert log.dropped == 2 and not folder.exists()
    folder.mkdir()
    log.write("back")
    assert (folder / "hub.log").read_text() == "[2 lines of this log were lost: the disk was full]\nback\n"


def test_the_log_is_kept_after_the_classroom_that_made_it_is_killed(tmp_path):
    """The hub and the proxy outlive a classroom killed (SIGKILL, the out-of-memory killer): their log's keeper
    does too, so their next lines are written, and the proxy, which node ends at a write to a pipe nobody reads,
    goes on."""
    survivor = tmp_path / "survivor.pid"
    classroom = (f"import os, subprocess, sys\n"
                 f"from rlhf_course.classroom.bounded_log import BoundedLog\n"
                 f"log = BoundedLog({str(tmp_path / 'proxy.log')!r}, keep_bytes=10_000, line_bytes=200)\n"
                 f"output = log.pipe()\n"
                 f"child = subprocess.Popen(['node', '-e', \"console.log('before'); setTimeout(() => "
                 f"console.log('after the classroom'), 1500)\"], stdout=output, stderr=output, "
                 f"start_new_session=True)\n"
                 f"open({str(survivor)!r}, 'w').write(str(child.pid))\n"
                 f"os.kill(os.getpid(), 9)\n")
    if shutil.which("node") is None:
        pytest.skip("node (the proxy's runtime) is not installed")
    assert subprocess.run([sys.executable, "-c", classroom]).returncode == -9
    pid = int(survivor.read_text())
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and os.path.exists(f"/proc/{pid}") and "Z" not in _state(pid):
        time.sleep(0.1)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and "after the classroom" not in _text(tmp_path / "proxy.log"):
        time.sleep(0.1)
    assert _text(tmp_path / "proxy.log") == "before\nafter the classroom\n"


def _text(path) -> str:
    """A log's text, empty while it does not exist."""
    try:
        return path.read_text()
    except FileNotFoundError:
        return ""


def _state(pid: int) -> str:
    """A process's state letter (``Z``: ended, not yet reaped by its parent), empty once it is gone."""
    try:
        return open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[0]
    except OSError:
        return ""


def test_the_tail_since_a_mark_reads_across_the_set_aside_file(tmp_path):
    path = tmp_path / "hub.log"
    log = BoundedLog(path, keep_bytes=1000, line_bytes=100)
    log.write("\n".join(f"before {i}" for i in range(5)))
    since = mark(path)
    log.write("\n".join(f"after {i:03d} " + "y" * 30 for i in range(40)))  # set aside once or more
    gained = tail(path, since, lines=1000).splitlines()
    assert not any(line.startswith("before") for line in gained)
    assert gained[-1].startswith("after 039") and len(gained) >= 20
    assert tail(path, lines=2).splitlines()[-1].startswith("after 039")
    assert tail(tmp_path / "none.log") == "" and mark(tmp_path / "none.log") == (0, 0)


def test_a_bound_that_cannot_hold_two_lines_is_refused(tmp_path):
    with pytest.raises(ValueError, match="must hold two lines"):
        BoundedLog(tmp_path / "hub.log", keep_bytes=100, line_bytes=100)


def test_the_last_lines_include_those_just_set_aside(tmp_path):
    """A start that fails right after its log was set aside: its last lines are read across both files."""
    path = tmp_path / "jupyterhub.log"
    log = BoundedLog(path, keep_bytes=200, line_bytes=100)
    log.write("a" * 90)
    log.write("just set aside")
    log.write("x" * 99)  # 106 + 100 bytes: past the bound, so the log is set aside first
    assert path.read_text() == "x" * 99 + "\n"
    assert tail(path, lines=3).splitlines() == ["a" * 90, "just set aside", "x" * 99]
