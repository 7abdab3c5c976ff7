"""The classroom's spawner (`make hub`): each user's JupyterLab runs as that user, as with JupyterHub's
LocalProcessSpawner, and in addition

* its kernels talk to it over Unix sockets in the user's own runtime folder
  (`/run/rlhf-classroom/<user>/`, 0700): no other account can connect to them.  Over TCP on loopback,
  any local account could subscribe to any kernel's IOPub port and hear its cells and outputs;
  the transport itself (`KernelManager.transport = "ipc"`) is set in the config every user's server
  reads (rlhf_course/classroom/hub.py);
* one user cannot starve the classroom: the server and everything it starts (kernels, terminals,
  nbgrader's validation) share one cgroup per user, memory (`mem_limit`), processes (`process_limit`)
  and CPU (`cpu_limit`, in cores), and run under rlimits: processes of the account (RLIMIT_NPROC),
  the size of one file written (RLIMIT_FSIZE, `file_size_limit`), and, where the kernel lets root
  make no cgroup, the address space of each process (RLIMIT_AS, `mem_limit`).  A disk quota for the
  homes is the file system's business (README).  Stopping the server kills whatever is left in that cgroup, so
  nothing of a stopped server's (a process holding a training slot and its CPU boost) runs on;
* the hub routes to a server's port only once the user's own server listens on it: JupyterHub picks the port
  (bound, then closed) seconds before the server binds it, and any local account that listens there first
  would be sent the user's lab at the hub's origin, where its page's scripts act as the user (make API tokens,
  read the files; the instructor's: the solutions and hidden tests).  Such a start fails, naming the account;
* the server, and everything it starts, binds no TCP port but the one the hub chose for it (Landlock's network
  rules, rlhf_course/classroom/tcp_binds.py): the machine's ports are shared, and one account binding them all left
  the hub no port for any server and the proxy none to reach one.  Where the kernel has no such rules (before Linux
  6.7), each start says so in the hub's log;
* its spawn page says, while the server starts, how many of the class's servers start before it (both
  languages: JupyterHub's page has one);
* its output goes to a log of its own, `<log_folder>/<user>.log` (root's, 0600, in root's 0700 folder; the hub
  opens it and hands it over as the server's stdout and stderr, its stdin /dev/null): the server and its kernels
  hold no descriptor of the hub's log, where every login's name and request is (a password typed into the name
  field too), and a student who writes into or fills her own log harms no one else's.  A log past
  `log_keep_bytes` when its server starts is set aside as `<user>.log.1` (the one before it dropped), so each user
  has at most two, each at most `file_size_limit` (the student's processes cannot write a file past it);
* torch's threads fit that CPU quota: OMP_NUM_THREADS (the quota's cores) and OMP_WAIT_POLICY=PASSIVE in
  the server's environment, which its kernels inherit (:func:`thread_environment`).

The process enters its cgroup and takes its rlimits in the forked child, before it becomes the user:
nothing the user can configure runs outside them.
"""
from __future__ import annotations

import asyncio
import contextlib
import math
import os
import pwd
import resource
import shutil
import signal
import stat
import subprocess
import time
from pathlib import Path

from jupyterhub.spawner import LocalProcessSpawner
from jupyterhub.traitlets import ByteSpecification
from traitlets import Int, Unicode, default

from rlhf_course.classroom.accounts import release_left_memory
from rlhf_course.classroom.tcp_binds import allow_tcp_binds_only_to, bind_rules_supported

CGROUP_ROOT = Path("/sys/fs/cgroup")
CGROUP_NAME = "rlhf-classroom"
RUNTIME_ROOT = Path("/run/rlhf-classroom")
SERVER_LOG_ROOT = Path("/var/log/rlhf-classroom/servers")  # the classroom's hub sets its own (<base>/hub/servers)
LOG_KEEP_BYTES = 16 * 1024**2  # a server's log larger than this when the server starts is set aside
DEFAULT_CPUS = 1.0  # each user's CPU quota in cores (cpu_limit's default)
PROGRESS_SECONDS = 3  # how often the spawn page hears how many servers start before the student's
# What the spawn page says while a server starts (JupyterHub's page has one language: both, English first)
STARTING_AHEAD = "The class is starting: {ahead} servers ahead of yours. Yours opens by itself; nothing is wrong."
STARTING_NEXT = "Your server is starting; it opens by itself."
PORT_TAKEN = ("Your server could not start: another account ({accounts}) was listening on its port {port}. "
              "Log in again to start it on another port.")
SERVER_DIED = "Your server stopped while starting. Log in again to start it."
LISTEN = "0A"  # a socket's state in /proc/net/tcp: listening
STARTING: dict[str, tuple[float, object]] = {}  # this hub's starting servers: user -> (when it began, spawner)


def servers_ahead(name: str, starting: dict = STARTING) -> int:
    """How many servers began to start before ``name``'s and are still starting (those done are forgotten)."""
    for other in [n for n, (_, spawner) in starting.items() if spawner.pending != "spawn" and n != name]:
        del starting[other]
    mine = starting.get(name, (float("inf"), None))[0]
    return sum(1 for other, (since, _) in starting.items() if other != name and since < mine)


def starting_message(ahead: int) -> str:
    """The spawn page's sentence, in English and Chinese."""
    return both_languages(STARTING_AHEAD if ahead else STARTING_NEXT, ahead=ahead)


class ServerNotListening(RuntimeError):
    """A server's start that must not be routed: nothing of the user's listens on its port."""


class PortTaken(ServerNotListening):
    """Another account listens on the port JupyterHub chose for a server."""


def both_languages(english: str, **fields) -> str:
    from rlhf_course.i18n import CHINESE, t
    return f"{t(english, 'en', **fields)} / {t(english, CHINESE, **fields)}"


def port_listeners(port: int, tables: tuple[str, ...] = ("/proc/net/tcp", "/proc/net/tcp6")) -> set[int]:
    """The uids of the sockets listening on TCP ``port`` (any address, IPv4 or IPv6), from the kernel's tables."""
    uids = set()
    for table in tables:
        with contextlib.suppress(OSError):
            for line in Path(table).read_text().splitlines()[1:]:
                fields = line.split()  # sl local_address rem_address st tx:rx tr:when retrnsmt uid ...
                if fields[3] == LISTEN and int(fields[1].rsplit(":", 1)[1], 16) == port:
                    uids.add(int(fields[7]))
    return uids


def account_name(uid: int) -> str:
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return str(uid)


async def accepts(port: int, host: str = "127.0.0.1") -> bool:
    """Whether something accepts connections on ``host``:``port`` now (where the proxy will send the user's traffic)."""
    try:
        _, writer = await asyncio.wait_for(asyncio.open_connection(host, port), 5)
    except (OSError, asyncio.TimeoutError):
        return False
    writer.close()
    return True


async def own_listener(port: int, uid: int, exited, every: float = 0.25) -> None:
    """Back once account ``uid`` listens on ``port``; :class:`PortTaken` if another account listens there (before
    or besides it), :class:`ServerNotListening` if the server ``exited()`` first (its port free for anyone).  The
    kernel's socket tables are read only once something accepts on the port: with a class's servers starting at
    once, reading them every poll would cost the hub more than the starts."""
    while True:
        if await accepts(port):
            owners = port_listeners(port)
            if owners - {uid}:
                accounts = ", ".join(sorted(account_name(other) for other in owners - {uid}))
                raise PortTaken(both_languages(PORT_TAKEN, port=port, accounts=accounts))
            if uid in owners:
                return
        if exited():
            raise ServerNotListening(both_languages(SERVER_DIED))
        await asyncio.sleep(every)


class UserCgroup:
    """One user's cgroup (v2, or v1's memory, pids and cpu hierarchies), made by root."""

    def __init__(self, name: str, root: Path = CGROUP_ROOT):
        self.name, self.root = name, root
        self.v2 = (root / "cgroup.controllers").is_file()

    def dirs(self) -> list[Path]:
        if self.v2:
            return [self.root / CGROUP_NAME / self.name]
        return [self.root / c / CGROUP_NAME / self.name for c in ("memory", "pids", "cpu") if (self.root / c).is_dir()]

    def prepare(self, memory: int | None, cpus: float | None, processes: int | None) -> list[Path]:
        """Make the cgroup with these limits; its `cgroup.procs` files, or [] where root may make none."""
        try:
            if self.v2:
                parent = self.root / CGROUP_NAME
                parent.mkdir(exist_ok=True)
                (parent / "cgroup.subtree_control").write_text("+memory +pids +cpu")
            period = 100_000
            for d in self.dirs():
                d.mkdir(parents=True, exist_ok=True)
                controller = "unified" if self.v2 else d.parent.parent.name
                settings = {
                    "unified": {"memory.max": memory, "memory.swap.max": 0 if memory else None,
                                "pids.max": processes,
                                "cpu.max": f"{int(period * cpus)} {period}" if cpus else None},
                    "memory": {"memory.limit_in_bytes": memory, "memory.memsw.limit_in_bytes": memory},
                    "pids": {"pids.max": processes},
                    "cpu": {"cpu.cfs_period_us": period if cpus else None,
                            "cpu.cfs_quota_us": int(period * cpus) if cpus else None},
                }[controller]
                for file, value in settings.items():
                    if value is not None and (d / file).exists():
                        (d / file).write_text(str(value))
            return [d / "cgroup.procs" for d in self.dirs()]
        except OSError:
            return []

    def empty(self, tries: int = 50) -> None:
        """Kill every process in it, the children they fork meanwhile too (a pass kills those listed, the next
        those forked since; ``pids.max`` bounds how many there can be)."""
        for _ in range(tries):
            pids = [pid for d in self.dirs() for pid in _cgroup_pids(d)]
            if not pids:
                return
            for pid in pids:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGKILL)
            time.sleep(0.02)

    def remove(self) -> None:
        """Kill what is left in it (the account is going) and remove it."""
        self.empty()
        for d in self.dirs():
            for _ in range(50):
                try:
                    d.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:  # busy while the killed processes exit
                    time.sleep(0.1)


def _cgroup_pids(cgroup: Path) -> list[int]:
    """The processes in ``cgroup`` (none when it does not exist)."""
    try:
        return [int(pid) for pid in (cgroup / "cgroup.procs").read_text().split()]
    except OSError:
        return []


def runtime_dir(name: str, root: Path = RUNTIME_ROOT) -> Path:
    """The user's private runtime folder (kernels' connection files and sockets): root's `root` (0755)
    holds one 0700 folder per account, owned by it.  Short on purpose: a Unix socket's path has at
    most 107 bytes."""
    user = pwd.getpwnam(name)
    root.mkdir(mode=0o755, parents=True, exist_ok=True)
    info = root.lstat()
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != 0 or info.st_mode & 0o022:
        raise RuntimeError(f"{root} must be a folder of root's that only root can write to")
    folder = root / name
    with contextlib.suppress(FileNotFoundError):
        info = folder.lstat()
        if not stat.S_ISDIR(info.st_mode) or info.st_uid != user.pw_uid:
            shutil.rmtree(folder) if stat.S_ISDIR(info.st_mode) else folder.unlink()
    with contextlib.suppress(FileExistsError):
        folder.mkdir(mode=0o700)
    os.chown(folder, user.pw_uid, user.pw_gid, follow_symlinks=False)
    folder.chmod(0o700)
    return folder


def server_log(folder: Path, name: str, keep_bytes: int = LOG_KEEP_BYTES) -> int:
    """A descriptor (append only, not inherited) on ``name``'s server's log ``folder/<name>.log``: root's, 0600,
    in ``folder``, root's and 0700 (made so).  A log past ``keep_bytes`` becomes ``<name>.log.1`` first, the one
    there before dropped.  Links and anything but root's regular files are refused, never followed."""
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    info = folder.lstat()
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != 0:
        raise RuntimeError(f"{folder} must be a folder of root's (the servers' logs)")
    folder.chmod(0o700)
    path = folder / f"{name}.log"
    with contextlib.suppress(FileNotFoundError):
        if path.lstat().st_size > keep_bytes:
            os.replace(path, folder / f"{name}.log.1")
    descriptor = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    info = os.fstat(descriptor)
    if not stat.S_ISREG(info.st_mode) or info.st_uid != 0:
        os.close(descriptor)
        raise RuntimeError(f"{path} must be a file of root's (a server's log)")
    os.fchmod(descriptor, 0o600)
    return descriptor


def remove_user_resources(names, runtime_root: Path = RUNTIME_ROOT) -> None:
    """What the spawner made for these accounts: their cgroups and runtime folders."""
    for name in names:
        UserCgroup(name).remove()
        shutil.rmtree(runtime_root / name, ignore_errors=True)
    with contextlib.suppress(OSError):
        runtime_root.rmdir()  # only when no other classroom uses it


def limited_preexec(name: str, drop_privileges, mem_limit: int | None, cpu_limit: float | None,
                    process_limit: int | None, file_size_limit: int | None, bind_port: int | None = None):
    """A `preexec_fn`: enter the user's cgroup, take the rlimits and, with ``bind_port``, bind no TCP port but that
    one (rlhf_course/classroom/tcp_binds.py), still as root; then become the user."""
    procs = UserCgroup(name).prepare(mem_limit, cpu_limit, process_limit)
    rlimits = [(resource.RLIMIT_NPROC, process_limit), (resource.RLIMIT_FSIZE, file_size_limit)]
    if not procs:  # no cgroup: each process's address space instead of the user's resident memory
        rlimits.append((resource.RLIMIT_AS, mem_limit))
    rlimits = [(which, value) for which, value in rlimits if value]

    def preexec():
        pid = str(os.getpid()).encode()
        for path in procs:
            descriptor = os.open(path, os.O_WRONLY)
            try:
                os.write(descriptor, pid)
            finally:
                os.close(descriptor)
        for which, value in rlimits:
            resource.setrlimit(which, (value, value))
        if bind_port is not None:
            allow_tcp_binds_only_to(bind_port)
        drop_privileges()

    return preexec


def thread_environment(cpu_limit: float | None) -> dict[str, str]:
    """What every server and kernel of a user needs so torch (OpenMP) fits the user's CPU quota: as many
    threads as the quota has cores (rounded up; torch otherwise takes the machine's cores), and threads
    that sleep, not spin, while they wait for work (OMP_WAIT_POLICY=PASSIVE): under a one-core quota a
    spinning thread burns the quota its partner needs (issue #37: a class's training cells never finished)."""
    env = {"OMP_WAIT_POLICY": "PASSIVE"}
    if cpu_limit:
        env["OMP_NUM_THREADS"] = str(max(1, math.ceil(cpu_limit - 1e-9)))
    return env


class ClassroomSpawner(LocalProcessSpawner):
    process_limit = Int(256, help="processes and threads of each user, all together (a fork bomb stops here)"
                        ).tag(config=True)
    file_size_limit = ByteSpecification(1024**3, help="the largest file a user's process may write"
                                        ).tag(config=True)
    runtime_root = Unicode(str(RUNTIME_ROOT), help="root's folder of the users' private runtime folders"
                           ).tag(config=True)
    log_folder = Unicode(str(SERVER_LOG_ROOT), help="root's folder of the users' servers' own logs (<user>.log)"
                         ).tag(config=True)
    log_keep_bytes = ByteSpecification(LOG_KEEP_BYTES, help="a server's log larger than this when the server "
                                       "starts is set aside as <user>.log.1").tag(config=True)

    @default("mem_limit")
    def _mem_limit_default(self):
        return 4 * 1024**3  # torch and the tiny LM's training fit, with room (bench/RESULTS.md)

    @default("cpu_limit")
    def _cpu_limit_default(self):
        return DEFAULT_CPUS

    def make_preexec_fn(self, name):
        return limited_preexec(name, super().make_preexec_fn(name), self.mem_limit, self.cpu_limit,
                               self.process_limit, self.file_size_limit, self.bind_port())

    def bind_port(self) -> int | None:
        """The one TCP port the server (and all it starts) may bind: its own, where the kernel can enforce it."""
        if self.port and bind_rules_supported():
            return self.port
        self.log.warning("%s's server may bind any TCP port: this kernel's Landlock has no network rules (Linux "
                         "6.7 or newer needed), so one account can hold every free port (bench/port_hold.py)",
                         self.user.name)
        return None

    async def start(self):
        STARTING[self.user.name] = (time.monotonic(), self)
        ip, port = await self.start_logging_to_own_file()
        try:
            await own_listener(port, pwd.getpwnam(self.user.name).pw_uid, lambda: self.proc.poll() is not None)
        except ServerNotListening as refused:
            self.log.error("Not routing %s's server: %s", self.user.name, refused)
            await self.stop(now=True)
            raise
        return ip, port

    async def start_logging_to_own_file(self) -> tuple[str, int]:
        """LocalProcessSpawner's start, the server's stdout and stderr its own log, its stdin /dev/null and no
        other descriptor of the hub's (by default it inherits all three of the hub's: the hub's log)."""
        configured = self.popen_kwargs
        log = server_log(Path(self.log_folder), self.user.name, self.log_keep_bytes)
        self.popen_kwargs = {**configured, "stdin": subprocess.DEVNULL, "stdout": log, "stderr": subprocess.STDOUT,
                             "close_fds": True}
        try:
            return await super().start()
        finally:
            self.popen_kwargs = configured
            os.close(log)  # the server holds its own copy

    async def progress(self):
        """While the server starts, every PROGRESS_SECONDS: how many of the class's servers start before it (a
        class that logs in at once waits for the machine; the page says so instead of a bare spinner)."""
        try:
            while self.pending == "spawn":
                yield {"message": starting_message(servers_ahead(self.user.name))}
                await asyncio.sleep(PROGRESS_SECONDS)
        finally:
            if self.pending != "spawn":
                STARTING.pop(self.user.name, None)

    async def stop(self, now=False):
        """Stop the server, then everything else of its user's (kernels, terminals, whatever they left running),
        then what she left in memory with no process (:func:`release_left_memory`): nothing of a stopped server
        keeps its user's CPU, memory or a training slot (and the slot's boost)."""
        await super().stop(now=now)
        await asyncio.to_thread(UserCgroup(self.user.name).empty)
        removed = await asyncio.to_thread(release_left_memory, pwd.getpwnam(self.user.name).pw_uid)
        if removed:
            self.log.info("Removed what %s's stopped server left in memory: %s", self.user.name, ", ".join(removed))

    def get_env(self):
        env = super().get_env()
        env["JUPYTER_RUNTIME_DIR"] = str(runtime_dir(self.user.name, Path(self.runtime_root)))
        env.update(thread_environment(self.cpu_limit))
        return env
