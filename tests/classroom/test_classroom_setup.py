"""Fast checks of make hub's pieces (no root, no browser): the per-account password table, the
classroom never deleting a folder it did not make, its starting a stopped hub again and stopping the culler
a dead hub left."""
import asyncio
import contextlib
import concurrent.futures
import os
import signal
import subprocess
import sys
import re
import time
from pathlib import Path

import pytest

from rlhf_course.classroom.auth import PasswordTableAuthenticator
from rlhf_course.classroom.hub import MARKER, Classroom


def login(authenticator, name, password):
    # In a thread of its own: a Playwright session of another test may hold this thread's event loop.
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, authenticator.authenticate(None, {"username": name, "password": password})).result()


def test_each_account_logs_in_with_its_own_password_only():
    auth = PasswordTableAuthenticator(passwords={"ann": "s3cret-ann", "ben": "s3cret-ben"})
    assert login(auth, "ann", "s3cret-ann") == "ann"
    assert login(auth, "ben", "s3cret-ben") == "ben"
    assert login(auth, "ann", "s3cret-ben") is None  # another account's password
    assert login(auth, "ann", "") is None
    assert login(auth, "ann", "s3cret-ann ") is None
    assert login(auth, "carl", "s3cret-ann") is None  # no such account
    assert login(auth, "", "") is None
    assert login(PasswordTableAuthenticator(), "ann", "") is None  # an empty table lets nobody in


def test_a_folder_the_classroom_did_not_make_is_never_removed(tmp_path, repo):
    if os.geteuid() != 0:
        pytest.skip("the classroom checks for root first")
    base = tmp_path / "precious"
    base.mkdir()
    (base / "thesis.tex").write_text("years of work")
    classroom = Classroom(repo, base, "rlhfnever_", ["ann"], 8000, Path(sys.executable))
    with pytest.raises(SystemExit, match="is not a classroom folder"):
        classroom.create()
    classroom.remove()
    assert (base / "thesis.tex").read_text() == "years of work"
    assert not (base / MARKER).exists()


def test_the_hub_is_started_again_until_it_keeps_failing(tmp_path, capsys):
    """The classroom starts a hub that exited again (the servers ran on); a hub that exits at once three times in
    a row (its restart failing too) is given up, with the log's place."""
    classroom = Classroom(tmp_path, tmp_path / "base", "p_", ["a"], 1, Path("/bin/true"))
    classroom.hub_dir = tmp_path
    starts = []

    def exits(code: int) -> subprocess.Popen:
        return subprocess.Popen([sys.executable, "-c", f"raise SystemExit({code})"])

    def start():
        starts.append(len(starts))
        classroom.process = exits(3)
        if len(starts) == 2:  # exits while starting
            classroom.process.wait()
            raise SystemExit("JupyterHub exited (3) while starting")

    classroom.start = start
    classroom.process = exits(1)
    classroom.supervise()
    out = capsys.readouterr().out
    assert len(starts) == 2 and "JupyterHub is back" in out and "while starting" in out
    assert "exited (3) 3 times in a row" in out


def test_a_port_taken_before_the_first_start_gets_new_ports_and_anything_else_is_said(tmp_path, capsys):
    """The first start: a hub or proxy port taken since the classroom chose it (its log says so) -> both start
    again on new ports, the hub's configuration rewritten; any other exit is raised at once with its log's end."""
    classroom = Classroom(tmp_path, tmp_path / "base", "p_", ["a"], 1, Path("/bin/true"))
    classroom.hub_dir = tmp_path
    (tmp_path / "proxy.log").write_text("an earlier run: Error: listen EADDRINUSE\n")  # not this start's
    written, tried = [], []
    classroom.write_hub_config = lambda: written.append((classroom.hub_port, classroom.proxy_api_port))

    def start(says: list[str]):
        def attempt():
            tried.append((classroom.hub_port, classroom.proxy_api_port))
            if says:
                name, line = says.pop(0)
                with open(tmp_path / name, "a") as log:
                    log.write(line + "\n")
                raise SystemExit("JupyterHub exited (1)")
        return attempt

    classroom.start = start([("proxy.log", "Error: listen EADDRINUSE: address already in use 127.0.0.1:1"),
                             ("jupyterhub.log", "OSError: [Errno 98] Address already in use")])
    classroom.start_first()
    assert len(tried) == 3 and written == tried[1:] and len(set(tried)) == 3, (tried, written)
    assert capsys.readouterr().out.count("was taken meanwhile") == 2

    tried.clear()
    classroom.start = start([("jupyterhub.log", "ImportError: no module named nbgrader")])
    with pytest.raises(SystemExit):
        classroom.start_first()
    assert len(tried) == 1  # not a port: no second try


def test_the_hub_s_pid_file_is_replaced_whole_when_the_hub_starts_again(tmp_path):
    """`kill $(cat hub/jupyterhub.pid)` (or a test) reading the file as the classroom starts the hub again reads the
    old number or the new one, never an empty file: the new number is written beside it and moved over it."""
    classroom = Classroom(tmp_path, tmp_path / "base", "p_", ["a"], 1, Path("/bin/true"))
    classroom.hub_dir, classroom.proxy_token = tmp_path, "t"
    classroom.proxy_process = type("Running", (), {"poll": lambda self: None})()  # the proxy outlives the hub
    classroom.server = type("Env", (), {"python": "/bin/false", "path": os.environ["PATH"]})()  # a hub that exits
    pid_file = tmp_path / "jupyterhub.pid"
    pid_file.write_text("12345\n")  # the hub before
    before = pid_file.stat().st_ino
    with pytest.raises(SystemExit, match="JupyterHub exited"):
        classroom.start(timeout=10)
    assert pid_file.read_text() == f"{classroom.process.pid}\n"
    assert pid_file.stat().st_ino != before  # a new file, not the old one truncated and written
    assert sorted(p.name for p in tmp_path.glob("jupyterhub.pid*")) == ["jupyterhub.pid"]


def test_a_culler_left_by_a_dead_hub_is_stopped_and_another_classroom_s_is_not(tmp_path):
    """A hub killed outright leaves its jupyterhub-idle-culler running (JupyterHub starts services in a session of
    their own): the classroom stops its own, found by its environment's Python, before the next hub starts one and
    when it stops; a culler of another classroom (another Python) runs on."""
    fake = tmp_path / "fake"
    fake.mkdir()
    (fake / "jupyterhub_idle_culler.py").write_text("import time\ntime.sleep(120)\n")  # shadows the real one

    def culler(python: str) -> subprocess.Popen:
        return subprocess.Popen([python, "-m", "jupyterhub_idle_culler", "--timeout=20"], cwd=fake,
                                start_new_session=True)

    other_python = tmp_path / "other-python"
    other_python.symlink_to(sys.executable)
    ours, theirs = culler(sys.executable), culler(str(other_python))
    try:
        classroom = Classroom(tmp_path, tmp_path / "base", "p_", ["a"], 1, Path("/bin/true"))
        classroom.server = type("Env", (), {"python": sys.executable})()
        deadline = time.time() + 10
        while time.time() < deadline and ours.pid not in classroom.stop_cullers():
            time.sleep(0.1)  # until its command line is readable
        assert ours.wait(timeout=10) == -signal.SIGTERM
        assert theirs.poll() is None
    finally:
        for process in (ours, theirs):
            process.kill()
            process.wait()


CLEAN_UP_AFTER_A_STOP = """
import signal, sys, time
from rlhf_course.classroom.hub import stop_once_on_signals
{install}
try:
    print("ready", flush=True)  # inside the try: a signal right after it is the clean-up's too
    while True:
        time.sleep(0.01)
except KeyboardInterrupt:
    pass
finally:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    total = 0
    for i in range(300000):  # a clean-up long enough for the rest of the burst to arrive
        total += i
    print("cleaned up", flush=True)
"""


def test_a_burst_of_stop_signals_cannot_cut_the_classrooms_clean_up():
    """make hub's main (rlhf_course/classroom/hub.py: stop_once_on_signals) stops on the first SIGTERM or SIGINT
    and ignores the next ones: a test's killpg and make's own forwarded SIGTERM arrive together, and once the second
    one cut the clean-up (the accounts stayed).  A burst of signals at the process, 3 times (a handler that only
    raises was cut in 20 runs of 20)."""
    for _ in range(3):
        process = subprocess.Popen([sys.executable, "-c", CLEAN_UP_AFTER_A_STOP.format(install="stop_once_on_signals()")],
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        assert process.stdout.readline() == "ready\n"
        for signum in [signal.SIGTERM] * 30 + [signal.SIGINT] * 30:
            with contextlib.suppress(ProcessLookupError):
                os.kill(process.pid, signum)
        out, err = process.communicate(timeout=30)
        assert "cleaned up" in out, err[-2000:]


def test_the_hub_gives_each_server_a_log_of_its_own_in_its_folder(tmp_path):
    """make hub's JupyterHub config (loaded as JupyterHub loads it) sends each user's server's output to
    hub/servers/<user>.log, never to the hub's own log."""
    from traitlets.config.loader import PyFileConfigLoader

    from rlhf_course.classroom.prestart import TOKEN_FILE
    from rlhf_course.classroom.server_env import ServerEnv
    room = Classroom(tmp_path, tmp_path / "base", "p_", ["a"], 1, Path("/bin/true"))
    room.server = ServerEnv.__new__(ServerEnv)
    room.server.python, room.server.path = sys.executable, os.environ["PATH"]
    room.course_id, room.passwords, room.hub_dir = "c", {name: "p" for name in room.names}, tmp_path
    (tmp_path / TOKEN_FILE).write_text("a token\n")
    room.write_hub_config()
    config = PyFileConfigLoader("jupyterhub_config.py", path=str(tmp_path)).load_config()
    assert config.ClassroomSpawner.log_folder == str(tmp_path / "servers")


def flooding_program(path: Path, lines: int, last: str, code: int) -> Path:
    """An executable that writes ``lines`` lines of 1 KiB and a longer one to its stdout, then ``last`` to its
    stderr, and exits ``code``: a hub or proxy a student's loop of requests makes write as fast as it answers, then
    fails to start."""
    path.write_text(f"#!{sys.executable}\nimport sys\n"
                    f"for i in range({lines}):\n    sys.stdout.write(f'[W 404 GET /hub/%06d' % i + 'x' * 1000 + '\\n')\n"
                    f"sys.stdout.write('[W 404 GET /' + 'y' * 100000 + '\\n')\nsys.stdout.flush()\n"
                    f"sys.stderr.write({last!r} + '\\n')\nsys.exit({code})\n")
    path.chmod(0o755)
    return path


def test_a_flood_of_requests_keeps_the_hub_s_and_the_proxy_s_logs_bounded_with_a_failed_start_s_lines(tmp_path):
    """A student's loop of requests makes the hub and the proxy write a line each, as fast as they answer: their
    logs are set aside past their bound (two files each at most), a line of 100 kB is cut and says so, and the lines
    that say why the hub did not start are kept, in the log and in what the classroom says."""
    classroom = Classroom(tmp_path, tmp_path / "base", "p_", ["a"], 1, Path("/bin/true"))
    classroom.hub_dir, classroom.proxy_token = tmp_path, "t"
    classroom.log_keep_bytes = 256 * 1024
    classroom.proxy = flooding_program(tmp_path / "proxy", 3000, "proxy: Error: listen EADDRINUSE", 1)
    classroom.start_proxy()
    classroom.proxy_process.wait(timeout=60)
    classroom.server = type("Env", (), {"python": str(flooding_program(tmp_path / "hub", 3000, "OSError: [Errno 98] "
                                                                       "Address already in use", 3)),
                                        "path": os.environ["PATH"]})()
    classroom.proxy_process = type("Running", (), {"poll": lambda self: None})()
    with pytest.raises(SystemExit, match=r"(?s)JupyterHub exited \(3\).*Address already in use") as said:
        classroom.start(timeout=30)
    assert "[W 404 GET /hub/002999" in str(said.value)  # the lines before the failure too
    for name in ("jupyterhub.log", "proxy.log"):
        logs = sorted(tmp_path.glob(name + "*"))
        deadline = time.monotonic() + 30  # the proxy exited: its last lines may still be on their way
        while not logs[0].read_text().endswith("EADDRINUSE\n") and name == "proxy.log" and time.monotonic() < deadline:
            time.sleep(0.1)
        assert [log.name for log in logs] == [name, name + ".1"], logs
        assert all(log.stat().st_size <= 256 * 1024 for log in logs), [log.stat().st_size for log in logs]
        text = "".join(log.read_text() for log in reversed(logs))
        assert text.endswith(("Address already in use\n", "EADDRINUSE\n")), text[-300:]
        assert "[W 404 GET /hub/002999" in text and "y" * 100000 not in text
        assert re.search(r"\[W 404 GET /y+ \[\.\.\. \d+ bytes cut\]\n", text)
