"""make hub, from another account on the machine (a few seconds, no hub, no browser): the shared
environment's build locks, the checkout's solutions and the per-user limits, each tried as a
non-root account (`nobody`, or an account made here) the way a student's shell would."""
import os
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
