"""make hub, from another account on the machine (a few seconds, no hub, no browser): the shared
environment's build locks, the checkout's solutions and the per-user limits, each tried as a
non-root account (`nobody`, or an account made here) the way a student's shell would."""
import os
import pwd
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from rlhf_course.classroom import accounts, hub, server_env, spawner
from jupyterhub.spawner import set_user_setuid

SYSTEM_PYTHON = "/usr/bin/python3"  # reachable by every account, unlike a private checkout's .venv


def as_nobody(code: str) -> subprocess.CompletedProcess:
    return subprocess.run(["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups",
                           SYSTEM_PYTHON, "-c", code], capture_output=True, text=True, timeout=60, cwd="/")


@pytest.fixture
def open_folder():
    """A folder every account can traverse (pytest's own tmp folders are 0700)."""
    folder = Path(tempfile.mkdtemp(prefix="rlhf-hardening-"))
    folder.chmod(0o755)
    yield folder
    subprocess.run(["rm", "-rf", str(folder)])


@pytest.fixture(autouse=True)
def needs_root():
    if os.geteuid() != 0:
        pytest.skip("these probes switch to other accounts (root)")


def test_no_other_account_can_open_or_hold_a_build_lock(open_folder, monkeypatch):
    monkeypatch.setattr(server_env, "ROOT", open_folder / "server-env")
    with server_env._locked(server_env.ROOT / "base-probe"):
        pass
    locks = [p for p in server_env.ROOT.rglob("*") if p.is_file()]
    assert locks, "the lock file was not made"
    probe = as_nobody(
        "import fcntl\n"
        f"for path in {[str(p) for p in locks]!r}:\n"
        "    try:\n"
        "        with open(path) as f:\n"
        "            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)\n"
        "            print('HELD', path)\n"
        "    except OSError as error:\n"
        "        print('refused', path, type(error).__name__)\n")
    assert "HELD" not in probe.stdout, probe.stdout + probe.stderr
    for lock in locks:  # root's own, 0600, in a 0700 folder of root's
        assert lock.stat().st_uid == 0 and lock.stat().st_mode & 0o777 == 0o600, lock
        assert lock.parent.stat().st_mode & 0o777 == 0o700 and lock.parent.stat().st_uid == 0
    # a link planted where a lock goes is never followed
    victim = open_folder / "victim"
    victim.write_text("root's file")
    (server_env.lock_folder() / "base-linked.lock").symlink_to(victim)
    with pytest.raises(OSError):
        with server_env._locked(server_env.ROOT / "base-linked"):
            pass
    assert victim.read_text() == "root's file"


def make_checkout(folder: Path) -> Path:
    checkout = folder / "checkout"
    for name in hub.PRIVATE_FOLDERS:
        (checkout / name / "rlhf").mkdir(parents=True)
        (checkout / name / "rlhf" / "solution.py").write_text("ANSWER = 42\n")
    for path in [checkout, *checkout.rglob("*")]:
        path.chmod(0o755 if path.is_dir() else 0o644)  # a clone under umask 022
    return checkout


def test_make_hub_refuses_a_checkout_students_could_read(open_folder, repo):
    checkout = make_checkout(open_folder)
    secret = checkout / "instructor" / "rlhf" / "solution.py"
    assert "ANSWER" in as_nobody(f"print(open({str(secret)!r}).read())").stdout  # what the check is about
    room = hub.Classroom(checkout, open_folder / "classroom", "rlhfnever_", ["ann"], 8000, Path(sys.executable))
    with pytest.raises(SystemExit, match=rf"chmod o-rwx {checkout}"):
        room.create()
    assert not (open_folder / "classroom").exists()  # refused before anything was made

    # private below a readable parent: the folders themselves shut others out
    for name in hub.PRIVATE_FOLDERS:
        (checkout / name).chmod(0o750)
    hub.check_checkout_private(checkout)
    assert "ANSWER" not in as_nobody(f"print(open({str(secret)!r}).read())").stdout
    # one file readable inside a traversable folder is enough to refuse
    (checkout / "source").chmod(0o711)
    (checkout / "source" / "rlhf").chmod(0o711)
    with pytest.raises(SystemExit, match="source/"):
        hub.check_checkout_private(checkout)
    assert "ANSWER" in as_nobody(f"print(open({str(checkout / 'source/rlhf/solution.py')!r}).read())").stdout

    # --make-checkout-private closes the checkout itself and says so
    hub.check_checkout_private(checkout, make_private=True)
    assert checkout.stat().st_mode & 0o007 == 0
    probe = as_nobody(f"print(open({str(checkout / 'source/rlhf/solution.py')!r}).read())")
    assert "ANSWER" not in probe.stdout and "PermissionError" in probe.stderr


@pytest.fixture
def account(open_folder):
    name = f"rlhflim_{os.getpid() % 100000}"
    accounts.remove_accounts([name])
    accounts.add_account(name, open_folder / "home" / name)
    (open_folder / "home").chmod(0o755)
    yield name
    spawner.remove_user_resources([name], open_folder / "run")
    accounts.remove_accounts([name])


HOG = """
import os, sys, time
what = sys.argv[1]
if what == "fork":  # a fork bomb that keeps its children
    children = 0
    try:
        while children < 2000:
            if os.fork() == 0:
                os.closerange(0, 3)  # the test reads until the output closes
                time.sleep(30)
                os._exit(0)
            children += 1
    except OSError as error:
        print("fork refused after", children, type(error).__name__)
    else:
        print("forked", children)
elif what == "memory":  # 2 GiB, touched
    block = bytearray(2 * 1024**3)
    for i in range(0, len(block), 4096):
        block[i] = 1
    print("got 2 GiB")
elif what == "disk":
    try:
        with open("big", "wb") as f:  # in the home
            f.write(b"x" * (8 * 1024**2))
        print("wrote 8 MiB")
    except OSError as error:
        print("write refused", error.errno)
"""


def run_limited(name: str, what: str) -> subprocess.CompletedProcess:
    preexec = spawner.limited_preexec(name, set_user_setuid(name), mem_limit=512 * 1024**2, cpu_limit=0.5,
                                          process_limit=40, file_size_limit=1024**2)
    return subprocess.run([SYSTEM_PYTHON, "-c", HOG, what], preexec_fn=preexec, capture_output=True, text=True,
                          timeout=120, env={"PATH": "/usr/bin:/bin"},
                          start_new_session=True)


def test_a_students_fork_bomb_memory_hog_and_huge_file_are_stopped(account):
    started = time.time()
    fork = run_limited(account, "fork")
    assert "fork refused after" in fork.stdout, fork.stdout + fork.stderr
    assert int(fork.stdout.split("after")[1].split()[0]) < 40
    subprocess.run(["pkill", "-KILL", "-u", account])
    memory = run_limited(account, "memory")
    print("memory hog:", memory.returncode, memory.stderr.strip().splitlines()[-1:])
    assert "got 2 GiB" not in memory.stdout and memory.returncode != 0, memory.stdout + memory.stderr
    disk = run_limited(account, "disk")
    assert "write refused 27" in disk.stdout, disk.stdout + disk.stderr  # EFBIG
    # the limits held for the account's processes only: this one still forks and allocates
    assert subprocess.run(["true"]).returncode == 0
    block = bytearray(64 * 1024**2)
    assert len(block) and time.time() - started < 60
    cgroups = spawner.UserCgroup(account).dirs()
    print("cgroups:", [str(d) for d in cgroups if d.exists()] or "none (rlimits alone)")


def test_make_grade_warns_of_a_dask_scheduler_without_tls():
    from rlhf_course.grading.batch import dask_address_warning
    for address in ("tcp://grading-host:8786", "grading-host:8786", "inproc://x"):
        warning = dask_address_warning(address)
        assert warning and "not a tls:// address" in warning and "as root" in warning, address
    assert dask_address_warning("tls://grading-host:8786") is None


def test_the_spawn_page_says_how_many_servers_start_before_the_students(monkeypatch):
    """A class that logs in at once: each student's spawn page counts the servers still starting before theirs,
    in both languages; servers done are no longer counted."""
    from types import SimpleNamespace

    from rlhf_course.classroom import spawner
    from rlhf_course.i18n import ZH
    starting = {name: (since, SimpleNamespace(pending="spawn")) for since, name in enumerate(["ann", "ben", "cat"])}
    assert [spawner.servers_ahead(n, starting) for n in ("ann", "ben", "cat")] == [0, 1, 2]
    starting["ann"][1].pending = None  # ann's server is up
    assert spawner.servers_ahead("cat", starting) == 1 and "ann" not in starting
    said = spawner.starting_message(12)
    assert said.startswith("The class is starting: 12 servers ahead of yours.")
    assert said.endswith(ZH[spawner.STARTING_AHEAD].format(ahead=12))
    assert spawner.starting_message(0).startswith(spawner.STARTING_NEXT)


def test_a_server_port_another_account_listens_on_first_fails_the_start_and_is_never_routed():
    """JupyterHub picks a server's port (random_port: bound, then closed) seconds before the server binds it; an
    account that listens on it first would be sent the student's (or the instructor's) lab, at the hub's origin,
    where its page's scripts act as them.  The spawner waits for a listener on the port and fails the start,
    naming the account, unless it is the user's own."""
    import asyncio
    import pwd
    import socket

    from rlhf_course.i18n import ZH
    nobody = pwd.getpwnam("nobody").pw_uid
    squatter = subprocess.Popen(
        ["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups", SYSTEM_PYTHON, "-c",
         "import socket, sys, time\ns = socket.socket()\ns.bind(('127.0.0.1', 0))\ns.listen()\n"
         "print(s.getsockname()[1], flush=True)\ntime.sleep(60)"], stdout=subprocess.PIPE, text=True)
    try:
        port = int(squatter.stdout.readline())
        assert nobody in spawner.port_listeners(port)
        with pytest.raises(spawner.PortTaken) as refused:
            asyncio.run(spawner.own_listener(port, os.getuid(), exited=lambda: False))
        said = str(refused.value)
        assert "nobody" in said and str(port) in said
        assert ZH[spawner.PORT_TAKEN].format(port=port, accounts="nobody") in said
    finally:
        squatter.kill()
        squatter.wait()
    own = socket.socket()
    own.bind(("127.0.0.1", 0))
    own.listen()
    with own:
        asyncio.run(asyncio.wait_for(spawner.own_listener(own.getsockname()[1], os.getuid(), exited=lambda: False), 5))
    with pytest.raises(spawner.ServerNotListening) as died:  # the server died before it listened: the port is free
        asyncio.run(spawner.own_listener(port, os.getuid(), exited=lambda: True))  # for anyone, never routed
    assert str(died.value).endswith(ZH[spawner.SERVER_DIED])


# -- the hub's own ports and an unplanned stop ------------------------------------------------------------------

def test_the_hub_s_internal_ports_are_ones_only_root_may_bind():
    """The hub's port (the proxy sends it every login) and the proxy's API port (the hub sends it the proxy's
    token) are chosen below net.ipv4.ip_unprivileged_port_start: a student looping on bind() while the hub
    restarts cannot take either.  They differ, skip a port in use, and `nobody` is refused each."""
    import socket
    limit = hub.unprivileged_port_start()
    if limit == 0:
        pytest.skip("every account may bind every port on this machine")
    classroom = hub.Classroom(Path("/nonexistent"), Path("/nonexistent/base"), "p_", ["a"], 8000, Path("/bin/true"))
    ports = (classroom.hub_port, classroom.proxy_api_port)
    assert classroom.port_warning is None
    assert all(0 < port < limit for port in ports) and len(set(ports)) == 2 and 8000 not in ports, ports
    probe = as_nobody("import socket, sys\n"
                      f"for port in {list(ports)!r}:\n"
                      "    try:\n"
                      "        socket.socket().bind(('127.0.0.1', port))\n"
                      "        print('BOUND', port)\n"
                      "    except OSError as error:\n"
                      "        print('refused', port, type(error).__name__)\n")
    assert "BOUND" not in probe.stdout and probe.stdout.count("PermissionError") == 2, probe.stdout + probe.stderr
    # the classroom's address is the instructor's choice: kept, with a note when any account may bind it
    assert "8000" in classroom.public_port_warning() and "HUB_PORT" in classroom.public_port_warning()
    classroom.port = limit - 1
    assert classroom.public_port_warning() is None
    held = socket.socket()
    held.bind(("127.0.0.1", ports[0]))
    held.listen()
    with held:  # a port in use is never chosen; the ones excluded neither
        chosen = {hub.root_only_port(exclude={ports[1]}) for _ in range(50)}
        assert ports[0] not in chosen and ports[1] not in chosen and all(port < limit for port in chosen)


def test_without_ports_only_root_may_bind_the_classroom_says_so_and_uses_ordinary_ones(tmp_path):
    """ip_unprivileged_port_start = 0 (every account binds every port), or a classroom not run as root: ordinary
    loopback ports, and a warning that names the risk and the fix."""
    setting = tmp_path / "ip_unprivileged_port_start"
    setting.write_text("0\n")
    refused = hub.privileged_ports_refused(setting)
    assert refused and "0" in refused
    setting.write_text("1024\n")
    assert hub.privileged_ports_refused(setting) is None
    ports, warning = hub.internal_ports(2, refused="the classroom does not run as root")
    assert len(set(ports)) == 2 and all(port >= 1024 for port in ports)
    assert "does not run as root" in warning and "restart" in warning and "ip_unprivileged_port_start" in warning


HEALTH_ANSWER = """
import http.server
class Health(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200)
        self.end_headers()
        self.wfile.write(b"ok")
server = http.server.HTTPServer(("127.0.0.1", 0), Health)
print(server.server_address[1], flush=True)
server.serve_forever()
"""


def answering(*user: str) -> tuple[subprocess.Popen, int]:
    """An HTTP server that answers every GET with 200 (as the hub's /hub/health does), run as ``user`` (root if
    none), and its port."""
    as_user = ["setpriv", f"--reuid={user[0]}", "--regid=nogroup", "--clear-groups"] if user else []
    process = subprocess.Popen([*as_user, SYSTEM_PYTHON, "-c", HEALTH_ANSWER], stdout=subprocess.PIPE, text=True,
                               cwd="/")
    return process, int(process.stdout.readline())


def test_the_health_check_believes_only_a_hub_of_the_classroom_s_own_account(tmp_path):
    """A student who took the hub's port answers /hub/health as the hub would: the classroom refuses to take her
    answer for the hub's, naming her account and the port, and believes the same answer from root's listener."""
    classroom = hub.Classroom(tmp_path, tmp_path / "base", "p_", ["a"], 8000, Path("/bin/true"))
    squatter, port = answering("nobody")
    try:
        classroom.url, classroom.port, classroom.hub_port = f"http://127.0.0.1:{port}", port, port
        with pytest.raises(SystemExit) as refused:
            classroom.hub_answers()
        assert "nobody" in str(refused.value) and str(port) in str(refused.value)
    finally:
        squatter.kill()
        squatter.wait()
    own, port = answering()
    try:
        classroom.url, classroom.port, classroom.hub_port = f"http://127.0.0.1:{port}", port, port
        assert classroom.hub_answers()
    finally:
        own.kill()
        own.wait()
    assert not classroom.hub_answers()  # nothing answers: not yet


class Recorded:
    """A classroom whose set-up and hub are fakes: ``create`` makes the folders a class leaves (a student's
    notebook, the course's gradebook); what it stops and removes is recorded."""

    def __init__(self, base: Path, supervise):
        self.classroom = hub.Classroom(base, base, "rlhfkeep_", ["ann"], 8000, Path("/bin/true"))
        self.calls = []
        classroom = self.classroom
        classroom.create = self.create
        classroom.start_first = lambda: None
        classroom.summary = lambda: "the summary"
        classroom.supervise = supervise
        classroom.stop = lambda: self.calls.append("stop")
        classroom.remove_accounts = lambda: self.calls.append("remove accounts")

    def create(self):
        classroom = self.classroom
        classroom.created = True
        classroom.base.mkdir()
        (classroom.base / hub.MARKER).write_text("")
        classroom.hub_dir.mkdir()
        work = classroom.base / "home" / "rlhfkeep_ann" / "lab.ipynb"
        work.parent.mkdir(parents=True)
        work.write_text("her work")
        classroom.course.mkdir(parents=True)
        (classroom.course / "gradebook.db").write_text("grades")


def test_an_unplanned_stop_stops_the_servers_and_keeps_every_account_home_and_the_folder(tmp_path, capsys,
                                                                                        monkeypatch):
    """The hub that cannot come back, or any crash of the classroom, is not the instructor's Ctrl-C: the hub, the
    proxy and every server stop, but the accounts, their homes (the students' work, the gradebook) and the folder
    stay, and the terminal and the hub's log say so with the command that removes them; the next make hub on
    that folder refuses to wipe it."""
    stopped = []
    monkeypatch.setattr(hub, "stop_processes", lambda names: stopped.append(list(names)))

    def crashes():
        raise RuntimeError("a bug in the classroom")

    for supervise, raised in ((lambda: None, None), (crashes, RuntimeError)):
        base = tmp_path / f"base-{len(stopped)}"
        recorded = Recorded(base, supervise)
        if raised:
            with pytest.raises(raised):
                hub.run_classroom(recorded.classroom, "off", prestart=False, on_ending=lambda: None)
        else:
            hub.run_classroom(recorded.classroom, "off", prestart=False, on_ending=lambda: None)
        out = capsys.readouterr().out
        assert "remove accounts" not in recorded.calls and "stop" in recorded.calls
        assert stopped[-1] == ["rlhfkeep_instructor", "rlhfkeep_ann"]
        assert (base / "home" / "rlhfkeep_ann" / "lab.ipynb").read_text() == "her work"
        assert (recorded.classroom.course / "gradebook.db").read_text() == "grades"
        command = f"python -m rlhf_course.classroom remove --base {base}"
        logged = (base / "hub" / "jupyterhub.log").read_text()
        for said in (out, logged):
            assert command in said and "kept" in said and "rlhfkeep_ann" in said, said
        with pytest.raises(SystemExit, match="remove --base"):
            hub.Classroom(base, base, "rlhfkeep_", ["ann"], 8000, Path("/bin/true")).refuse_a_kept_class()


def test_ctrl_c_still_removes_the_trial_classroom(tmp_path, capsys, monkeypatch):
    """The instructor's Ctrl-C (or SIGTERM) ends the trial as documented: accounts, homes and the folder go."""
    monkeypatch.setattr(hub, "stop_processes", lambda names: None)
    monkeypatch.setattr(hub, "remove_user_resources", lambda names: None)

    def interrupted():
        raise KeyboardInterrupt

    recorded = Recorded(tmp_path / "base", interrupted)
    recorded.classroom.server = None
    hub.run_classroom(recorded.classroom, "off", prestart=False, on_ending=lambda: None)
    assert "remove accounts" in recorded.calls and not (tmp_path / "base").exists()
    assert "removing the classroom's accounts" in capsys.readouterr().out


def test_the_remove_command_removes_a_kept_classroom_and_nothing_else(open_folder):
    """`python -m rlhf_course.classroom remove --base B`: every account whose home is in B/home, their group and
    B; refused for a folder the classroom did not make, and while a classroom still runs there."""
    from rlhf_course.classroom.__main__ import main
    base = open_folder / "kept"
    names = ["rlhfkept_instructor", "rlhfkept_ann"]
    accounts.remove_accounts(names, "rlhfkept_instructors")
    subprocess.run(["groupadd", "rlhfkept_instructors"], check=True)
    accounts.add_account(names[0], base / "home" / names[0], "rlhfkept_instructors")
    accounts.add_account(names[1], base / "home" / names[1])
    (base / "hub").mkdir()
    (base / "hub" / "accounts.json").write_text('{"prefix": "rlhfkept_"}')
    # her process outlives its parent, as a server outlives a stopped hub (not this test's child: no zombie)
    subprocess.run(["sh", "-c", "setpriv --reuid=rlhfkept_ann --regid=nogroup --clear-groups sleep 60 "
                    ">/dev/null 2>&1 &"], check=True)
    assert subprocess.run(["pgrep", "-u", "rlhfkept_ann"], capture_output=True).returncode == 0
    left = Path("/dev/shm/rlhfkept_ann-left")  # memory she left with no process: the account's removal takes it
    subprocess.run(["setpriv", "--reuid=rlhfkept_ann", "--regid=nogroup", "--clear-groups", "sh", "-c",
                    f"head -c 1048576 /dev/zero > {left}"], check=True)
    try:
        (open_folder / "precious").mkdir()
        with pytest.raises(SystemExit, match="not a classroom folder"):
            main(["remove", "--base", str(open_folder / "precious")])
        (base / hub.MARKER).write_text("")
        started = time.monotonic()
        assert main(["remove", "--base", str(base)]) == 0
        assert time.monotonic() - started < 5  # stopped at its SIGTERM, not the grace's end
        assert not base.exists() and (open_folder / "precious").exists()
        import grp
        import pwd
        for name in names:
            with pytest.raises(KeyError):
                pwd.getpwnam(name)
        with pytest.raises(KeyError):
            grp.getgrnam("rlhfkept_instructors")
        assert not left.exists()
    finally:
        accounts.remove_accounts(names, "rlhfkept_instructors")
        left.unlink(missing_ok=True)


def test_a_closed_terminal_is_an_unplanned_stop_unless_nohup_ignores_it():
    """SIGHUP (the instructor's ssh session gone) is not the instructor's stop: it raises what the classroom treats
    as a crash (everything kept); under `nohup make hub` (SIGHUP ignored) the classroom runs on."""
    import signal
    before = signal.getsignal(signal.SIGHUP)
    try:
        signal.signal(signal.SIGHUP, signal.SIG_DFL)
        hub.stop_on_hangup()
        with pytest.raises(hub.TerminalClosed, match="terminal closed"):
            os.kill(os.getpid(), signal.SIGHUP)
            time.sleep(5)
        signal.signal(signal.SIGHUP, signal.SIG_IGN)  # nohup
        hub.stop_on_hangup()
        os.kill(os.getpid(), signal.SIGHUP)
        time.sleep(0.1)
        assert signal.getsignal(signal.SIGHUP) == signal.SIG_IGN
    finally:
        signal.signal(signal.SIGHUP, before)


STAND_IN_SERVER = """
import errno, json, os, socket, subprocess, sys, time
from urllib.parse import urlparse

def descriptors(pid):
    folder = f"/proc/{pid}/fd"
    return {fd: os.readlink(f"{folder}/{fd}") for fd in os.listdir(folder) if os.path.exists(f"{folder}/{fd}")}

if sys.argv[1:2] == ["kernel"]:  # what a kernel does: inherits the server's stdout and stderr and writes to them
    print("the kernel's stdout line", flush=True)
    filled = "wrote"
    try:
        for _ in range(int(sys.argv[2]) // 4096):  # past the file size limit: fills its own log
            os.write(1, b"x" * 4096)
    except OSError as error:
        filled = errno.errorcode[error.errno]
    json.dump({"fds": descriptors("self"), "filled": filled}, open("kernel.json", "w"))
    time.sleep(60)
else:
    listener = socket.socket()
    listener.bind(("127.0.0.1", urlparse(os.environ["JUPYTERHUB_SERVICE_URL"]).port))
    listener.listen()
    print("the server's stdout line", flush=True)
    print("the server's stderr line", file=sys.stderr, flush=True)
    kernel = subprocess.Popen([sys.executable, "-c", sys.argv[1], "kernel", sys.argv[2]])
    while not os.path.exists("kernel.json"):
        time.sleep(0.05)
    json.dump({"server": descriptors("self"), "kernel": descriptors(kernel.pid), "kernel_pid": kernel.pid},
              open("server.json", "w"))
    time.sleep(60)
"""


def stand_in_spawner(name: str, home: Path, folder: Path, file_size_limit: int):
    """A ClassroomSpawner for ``name`` whose command is STAND_IN_SERVER (no hub: just what start() reads)."""
    from types import SimpleNamespace
    user = SimpleNamespace(name=name, escaped_name=name, url=f"/user/{name}/")
    hub_stand_in = SimpleNamespace(public_host="", api_url="http://127.0.0.1:1/hub/api/", base_url="/hub/")
    server = spawner.ClassroomSpawner(user=user, hub=hub_stand_in, runtime_root=str(folder / "run"),
                                      log_folder=str(folder / "hub" / "servers"), file_size_limit=file_size_limit,
                                      mem_limit=512 * 1024**2, start_timeout=30)
    server.cmd = [SYSTEM_PYTHON, "-c", STAND_IN_SERVER, STAND_IN_SERVER, str(4 * file_size_limit)]
    server.notebook_dir = str(home)
    return server


def test_a_server_and_its_kernels_write_their_own_log_and_hold_none_of_the_hubs(account, open_folder):
    """The hub's stdout and stderr are its log (every login's name, a password typed into the name field too): a
    server started through ClassroomSpawner, and a kernel it starts, hold no descriptor of it; their output goes to
    the user's own log, root's 0600, and filling that log past the file size limit fails the student's writes only."""
    import asyncio
    import json
    home = open_folder / "home" / account
    hub_dir = open_folder / "hub"
    hub_dir.mkdir(mode=0o700)
    hub_log = hub_dir / "jupyterhub.log"
    limit = 64 * 1024
    server = stand_in_spawner(account, home, open_folder, limit)
    saved = [os.dup(1), os.dup(2)]
    try:
        with open(hub_log, "a") as log:  # the hub's stdout and stderr, as `make hub` starts it
            os.dup2(log.fileno(), 1)
            os.dup2(log.fileno(), 2)
        asyncio.run(server.start())
    finally:
        for fd, copy in zip((1, 2), saved):
            os.dup2(copy, fd)
            os.close(copy)
    try:
        deadline = time.time() + 30
        while not (home / "server.json").exists() and time.time() < deadline:
            time.sleep(0.1)
        seen = json.loads((home / "server.json").read_text())  # as the user saw its own and its kernel's fds
        kernel = json.loads((home / "kernel.json").read_text())
        as_root = {pid: [os.readlink(f"/proc/{pid}/fd/{fd}") for fd in os.listdir(f"/proc/{pid}/fd")]
                   for pid in (server.proc.pid, seen["kernel_pid"])}
    finally:
        asyncio.run(server.stop(now=True))
    own_log = hub_dir / "servers" / f"{account}.log"
    for targets in [seen["server"].values(), seen["kernel"].values(), kernel["fds"].values(), *as_root.values()]:
        assert str(hub_log) not in targets, targets
        assert str(own_log) in targets, targets
    assert seen["server"]["0"] == "/dev/null"
    written = own_log.read_text(errors="replace")
    for line in ("the server's stdout line", "the server's stderr line", "the kernel's stdout line"):
        assert line in written and line not in hub_log.read_text()
    assert kernel["filled"] == "EFBIG" and own_log.stat().st_size <= limit
    info = own_log.stat()
    assert info.st_uid == 0 and info.st_mode & 0o777 == 0o600
    assert own_log.parent.stat().st_uid == 0 and own_log.parent.stat().st_mode & 0o777 == 0o700
    probe = as_nobody(f"print(open({str(own_log)!r}).read())")  # another account: not even its name's folder
    assert "line" not in probe.stdout and "PermissionError" in probe.stderr


def test_a_servers_log_past_its_bound_is_set_aside_at_the_next_start_and_links_are_refused(open_folder):
    """Each start: a log past ``keep_bytes`` becomes <user>.log.1 (the one before dropped), so a user has two logs
    at most; a link or another account's file where a log goes is refused, never followed."""
    folder = open_folder / "servers"
    for _ in range(3):
        descriptor = spawner.server_log(folder, "ann", keep_bytes=100)
        os.write(descriptor, b"y" * 150)
        os.close(descriptor)
    assert sorted(p.name for p in folder.iterdir()) == ["ann.log", "ann.log.1"]
    assert (folder / "ann.log").stat().st_size == 150 and (folder / "ann.log.1").stat().st_size == 150
    descriptor = spawner.server_log(folder, "ann", keep_bytes=1000)  # under the bound: appended to
    os.close(descriptor)
    assert (folder / "ann.log").stat().st_size == 150
    victim = open_folder / "victim"
    victim.write_text("root's file")
    (folder / "ben.log").symlink_to(victim)
    with pytest.raises(OSError):
        spawner.server_log(folder, "ben")
    assert victim.read_text() == "root's file"
    (folder / "cat.log").write_text("")
    os.chown(folder / "cat.log", 65534, 65534)
    with pytest.raises(RuntimeError, match="a file of root's"):
        spawner.server_log(folder, "cat")


LEAVES_MEMORY = """
import ctypes, os, sys
size = 32 * 1024**2
prefix = "/dev/shm/" + sys.argv[1]
with open(prefix + "-notes", "wb") as notes:  # a tmpfs file: memory until it is removed
    notes.write(b"m" * size)
os.mkdir(prefix + "-folder")
with open(prefix + "-folder/more", "wb") as more:
    more.write(b"m" * 4096)
libc = ctypes.CDLL(None, use_errno=True)
libc.shmat.restype = ctypes.c_void_p
IPC_CREAT, IPC_PRIVATE = 0o1000, 0
segment = libc.shmget(IPC_PRIVATE, size, IPC_CREAT | 0o600)  # kept after its maker exits, until removed
address = libc.shmat(segment, None, 0)
ctypes.memset(address, 1, size)
libc.shmdt(ctypes.c_void_p(address))
queue = libc.msgget(IPC_PRIVATE, IPC_CREAT | 0o600)
print(segment, queue)
"""


def cgroup_memory(name: str) -> int | None:
    """The memory charged to ``name``'s cgroup now, in bytes (None where the classroom makes no cgroup)."""
    for folder in spawner.UserCgroup(name).dirs():
        for charged in ("memory.current", "memory.usage_in_bytes"):
            if (folder / charged).exists():
                return int((folder / charged).read_text())
    return None


def sysv_ids(kind: str) -> set[int]:
    header, *rows = Path(f"/proc/sysvipc/{kind}").read_text().splitlines()
    return {int(row.split()[1]) for row in rows}


def test_a_stopped_server_leaves_nothing_of_its_user_in_memory(account, open_folder):
    """A file in /dev/shm (a tmpfs) and a System V shared memory segment outlive the process that made them: a
    student's cell could leave memory taken after her server stopped (the culler, the admin, her own logout), for
    as long as the machine runs, however often she does it.  Stopping her server removes hers, and nobody else's,
    and the memory they held returns; while a process of hers still runs outside her server, nothing is removed."""
    import asyncio
    home = open_folder / "home" / account
    classmates = Path("/dev/shm") / f"{account}-a-classmate-s"
    classmates.write_bytes(b"c")
    os.chown(classmates, 65534, 65534)  # nobody's
    preexec = spawner.limited_preexec(account, set_user_setuid(account), mem_limit=512 * 1024**2, cpu_limit=0.5,
                                      process_limit=40, file_size_limit=None)
    ours = [Path(f"/dev/shm/{account}-notes"), Path(f"/dev/shm/{account}-folder")]
    elsewhere = None
    try:
        left = subprocess.run([SYSTEM_PYTHON, "-c", LEAVES_MEMORY, account], preexec_fn=preexec, cwd=home,
                              capture_output=True, text=True, timeout=60, env={"PATH": "/usr/bin:/bin"})
        assert left.returncode == 0, left.stderr
        segment, queue = map(int, left.stdout.split())
        assert all(path.exists() for path in ours) and segment in sysv_ids("shm") and queue in sysv_ids("msg")
        charged = cgroup_memory(account)
        server = stand_in_spawner(account, home, open_folder, 1024**2)

        # a process of hers outside her server (another session): what she left stays
        elsewhere = subprocess.Popen(["setpriv", f"--reuid={account}", "--regid=nogroup", "--clear-groups",
                                      "sleep", "60"])
        time.sleep(0.2)
        asyncio.run(server.stop())
        assert all(path.exists() for path in ours) and segment in sysv_ids("shm")
        elsewhere.kill()
        elsewhere.wait()

        asyncio.run(server.stop())
        assert not any(path.exists() for path in ours)
        assert segment not in sysv_ids("shm") and queue not in sysv_ids("msg")
        assert classmates.exists()
        if charged is not None:
            returned = charged - cgroup_memory(account)
            print(f"memory returned to the machine: {returned / 1024**2:.1f} MiB of {charged / 1024**2:.1f} MiB")
            assert returned > 60 * 1024**2, (charged, cgroup_memory(account))
    finally:
        if elsewhere and elsewhere.poll() is None:
            elsewhere.kill()
        classmates.unlink(missing_ok=True)
        for path in ours:
            subprocess.run(["rm", "-rf", str(path)])
        uid = pwd.getpwnam(account).pw_uid
        for kind, option in (("shm", "-m"), ("msg", "-q")):
            header, *rows = Path(f"/proc/sysvipc/{kind}").read_text().splitlines()
            for row in rows:
                if int(dict(zip(header.split(), row.split()))["uid"]) == uid:
                    subprocess.run(["ipcrm", option, row.split()[1]])
