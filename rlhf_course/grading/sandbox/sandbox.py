"""A fresh sandbox for each submission's student code, and the trusted side of its pipe protocol.

Inside: no network (own network namespace), own PID namespace (everything dies with it), own IPC and
UTS namespaces, a read-only view of the system, the Python environment and this package only (no
course directory, gradebook, other students or environment secrets), two small size-limited tmpfs
folders as the only writable places (``/submission`` and ``/tmp``, new for every submission: nothing
the student writes ever reaches the host's disk or the next submission), an
unprivileged uid with no capability and ``no_new_privs``, and limits on memory, CPU and processes
that hold for every process the student starts (a cgroup per worker slot where the kernel lets us
create one, rlimits in any case).

Each worker slot runs one *zygote* (:mod:`zygote`): a bubblewrap sandbox with that read-only view and
torch imported once, which forks every sandbox of the slot into the fresh namespaces, folders, uid and
limits above.  It never runs student code and nothing it forks can reach it; the sandbox's pipes
come straight to this process.

The trusted side treats every byte that comes back as hostile: a reply's length is checked
against a cap *before* it is read, a reply of the wrong kind is refused, and observations come only
in a plain layout of JSON and raw bytes (:func:`~rlhf_course.grading.sandbox.observe.from_wire`; nothing the
sandbox sends is ever unpickled).  The grader never opens a path the sandbox could have written: the
job goes in and the feedback notebook comes out over the pipe (:mod:`protocol`).
"""
from __future__ import annotations

import atexit
import collections
import fcntl
import json
import os
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import rlhf_course
from rlhf_course.grading.sandbox import protocol, seccomp
from rlhf_course.course.limits import Limits
from rlhf_course.grading.sandbox.observe import encode_call
from rlhf_course.grading.sandbox.protocol import DEFINED, FAILED, NOTEBOOK, OBSERVATION, READY
from rlhf_course.course.settings import DEFAULT_CACHE_DIRECTORY
from rlhf_course.grading.sandbox.zygote import CAPABILITIES as ZYGOTE_CAPABILITIES, CGROUP_MOUNTS, FONT_MOUNTS, KEPT_ENV, KEPT_MOUNTS

BWRAP = shutil.which("bwrap") or "/usr/bin/bwrap"
SETPRIV = shutil.which("setpriv") or "/usr/bin/setpriv"
PRLIMIT = shutil.which("prlimit") or "/usr/bin/prlimit"
FIRST_UID = 61000  # sandbox uids are FIRST_UID + worker slot: process limits count per uid
PACKAGE_MOUNT = "/opt/rlhf-grader"  # the grader's own copy of this package, first on the sandbox's sys.path
CGROUP_NAME = "rlhf-grading"
SLOT_LOCKS = Path("/run/rlhf-grading")  # one lock file per slot, held while a sandbox uses it
SLOT_COUNT = 1024


class SandboxTimeout(Exception):
    def __init__(self, budget: str = "call"):
        super().__init__(f"the {budget} time limit ran out")
        self.budget = budget  # which limit: "startup", "call", "feedback" or "submission"


class SandboxDied(Exception):
    def __init__(self, message: str, log: str, out_of_memory: bool = False):
        super().__init__(message)
        self.log, self.out_of_memory = log, out_of_memory


class ProtocolViolation(SandboxDied):
    """The sandbox sent something the protocol does not allow (forged, oversized, of the wrong kind)."""


def log_flood_message(limits: Limits) -> str:
    return f"the sandbox wrote more than {limits.log_bytes / 2**20:g} MiB to its log (TrustedGrading.log_bytes)"


def sandbox_available() -> str | None:
    """None when the sandbox can run here, else why not."""
    for tool in (BWRAP, SETPRIV, PRLIMIT):
        if not Path(tool).exists():
            return f"{tool} is missing (Debian packages bubblewrap and util-linux)"
    if os.geteuid() != 0:
        return "the grader must run as root to start sandboxes under unprivileged uids"
    try:
        seccomp.architecture()
    except seccomp.UnknownArchitecture as exc:
        return str(exc)
    return None


# ----------------------------------------------------------------------------- cgroups

class Cgroups:
    """A cgroup per worker slot (memory, processes, CPU quota), v2 or v1, when the kernel lets
    root create one; ``None`` paths otherwise (then rlimits alone apply: address space per
    process, process count per uid, CPU time per process)."""

    def __init__(self, root: Path = Path("/sys/fs/cgroup")):
        self.root = root
        self.v2 = (root / "cgroup.controllers").is_file()

    def _dirs(self, slot: int) -> dict[str, Path]:
        name = f"{CGROUP_NAME}/slot-{slot}"
        if self.v2:
            return {"unified": self.root / name}
        return {c: self.root / c / name for c in ("memory", "pids", "cpu") if (self.root / c).is_dir()}

    def prepare(self, slot: int, limits: Limits) -> list[Path]:
        """Create (or reuse) the slot's cgroups, set the limits; return their ``cgroup.procs``."""
        try:
            dirs = self._dirs(slot)
            if self.v2:
                parent = self.root / CGROUP_NAME
                parent.mkdir(exist_ok=True)
                (parent / "cgroup.subtree_control").write_text("+memory +pids +cpu")
            for path in dirs.values():
                path.mkdir(parents=True, exist_ok=True)
            period = 100_000
            quota = int(period * limits.cpus)
            if self.v2:
                d = dirs["unified"]
                (d / "memory.max").write_text(str(limits.cgroup_memory_bytes))
                (d / "memory.swap.max").write_text("0") if (d / "memory.swap.max").exists() else None
                (d / "pids.max").write_text(str(limits.processes))
                (d / "cpu.max").write_text(f"{quota} {period}")
            else:
                if "memory" in dirs:
                    (dirs["memory"] / "memory.limit_in_bytes").write_text(str(limits.cgroup_memory_bytes))
                if "pids" in dirs:
                    (dirs["pids"] / "pids.max").write_text(str(limits.processes))
                if "cpu" in dirs:
                    (dirs["cpu"] / "cpu.cfs_period_us").write_text(str(period))
                    (dirs["cpu"] / "cpu.cfs_quota_us").write_text(str(quota))
            return [d / "cgroup.procs" for d in dirs.values()]
        except OSError:
            return []

    def parents(self) -> list[Path]:
        """The folders holding every slot's cgroups, one per hierarchy, made if need be (none without cgroups)."""
        try:
            parents = [d.parent for d in self._dirs(0).values()]
            for parent in parents:
                parent.mkdir(exist_ok=True)
                if self.v2:
                    (parent / "cgroup.subtree_control").write_text("+memory +pids +cpu")
            return parents
        except OSError:
            return []

    def out_of_memory_events(self, slot: int) -> int:
        """How many times the slot's memory limit was hit (a counter; compare before and after)."""
        try:
            dirs = self._dirs(slot)
            if self.v2:
                events = (dirs["unified"] / "memory.events").read_text().split()
                return int(events[events.index("oom_kill") + 1])
            return int((dirs["memory"] / "memory.failcnt").read_text())
        except (OSError, KeyError, ValueError, IndexError):
            return 0

    def kill_all(self, slot: int) -> None:
        """SIGKILL whatever is still in the slot's cgroups (a process that left the sandbox's
        process group and PID namespace would still be here)."""
        for path in self._dirs(slot).values():
            try:
                pids = (path / "cgroup.procs").read_text().split()
            except OSError:
                continue
            for pid in pids:
                try:
                    os.kill(int(pid), signal.SIGKILL)
                except (ProcessLookupError, ValueError, PermissionError):
                    pass


CGROUPS = Cgroups()


# ----------------------------------------------------------------------------- the command

def _read_only_binds() -> list[str]:
    paths = [p for p in dict.fromkeys(["/usr", "/lib", "/lib64", "/bin", "/etc/alternatives", "/etc/fonts",
                                       sys.base_prefix, sys.prefix]) if Path(p).exists()]
    # Parent folders bwrap would create for the mount points are made traversable (and
    # empty): the unprivileged uid inside must reach /root/.pyenv/... without seeing /root.
    parents = sorted({str(a) for p in [*paths, f"{PACKAGE_MOUNT}/rlhf_course"] for a in Path(p).parents if str(a) != "/"}, key=len)
    binds = []
    for parent in parents:
        binds += ["--perms", "0755", "--dir", parent]
    for path in paths:
        binds += ["--ro-bind", path, path]
    # Exactly the package this grader runs, whatever the environment's own install points at
    # (an editable install of another checkout, or none): PYTHONPATH puts it first.
    binds += ["--ro-bind", str(Path(rlhf_course.__file__).parent), f"{PACKAGE_MOUNT}/rlhf_course"]
    return binds


def matplotlib_cache(cache_directory: Path = DEFAULT_CACHE_DIRECTORY) -> Path:
    """A font cache built once by the trusted side (in ``cache_directory``, the course's
    ``TrustedGrading.cache_directory``) and shared read-only with every sandbox (building it takes a
    second or two, in every fresh sandbox otherwise)."""
    cache = Path(cache_directory) / "matplotlib"
    if not any(cache.glob("fontlist-*.json")):
        cache.mkdir(parents=True, exist_ok=True)
        subprocess.run([sys.executable, "-c", "import matplotlib.font_manager"], check=True,
                       env=dict(os.environ, MPLCONFIGDIR=str(cache)), capture_output=True)
    return cache


def _font_cache_binds(cache_directory: Path) -> list[str]:
    # matplotlib wants a writable config folder: a fresh one on the sandbox's /tmp, holding
    # a read-only copy of the prebuilt font list.
    binds = []
    for path in matplotlib_cache(cache_directory).glob("fontlist-*.json"):
        binds += ["--perms", "0777", "--dir", "/tmp/matplotlib", "--ro-bind", str(path), f"/tmp/matplotlib/{path.name}"]
    return binds


def sandbox_env() -> dict[str, str]:
    return {"HOME": "/submission", "PATH": f"{sys.prefix}/bin:/usr/bin:/bin", "PYTHONPATH": PACKAGE_MOUNT,
            "NBGRADER_EXECUTION": "autograde", "MPLCONFIGDIR": "/tmp/matplotlib",
            "MPLBACKEND": "module://matplotlib_inline.backend_inline", "OMP_NUM_THREADS": "1",
            "PYTHONDONTWRITEBYTECODE": "1"}


def bwrap_command(uid: int, env: dict[str, str], limits: Limits = Limits(),
                  program: list[str] | None = None, cache_directory: Path = DEFAULT_CACHE_DIRECTORY) -> list[str]:
    """The bwrap command line, run as ``program`` (default: the sandbox runner) under ``uid``;
    ``cache_directory`` holds the font list the sandbox reads (:func:`matplotlib_cache`)."""
    # Mounts apply in order: the empty /tmp comes first, so that an environment that itself
    # lives below /tmp is bound on top of it rather than hidden by it.
    size = str(limits.workspace_bytes)
    command = [BWRAP, "--unshare-pid", "--unshare-net", "--unshare-ipc", "--unshare-uts",
               "--unshare-cgroup-try", "--die-with-parent", "--new-session",
               "--proc", "/proc", "--dev", "/dev",
               "--perms", "1777", "--size", size, "--tmpfs", "/tmp",
               *_read_only_binds(),
               *_font_cache_binds(cache_directory),
               "--perms", "0777", "--size", size, "--tmpfs", "/submission",
               "--remount-ro", "/", "--clearenv"]
    for key, value in env.items():
        command += ["--setenv", key, value]
    program = program or [os.path.join(sys.prefix, "bin", "python"), "-m", "rlhf_course.grading.sandbox.sandbox_runner"]
    return command + ["--chdir", "/submission",
                      SETPRIV, f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "--inh-caps=-all",
                      "--bounding-set=-all", "--no-new-privs", *program]




def under_tmp() -> list[str]:
    """The read-only folders of every sandbox's view (:func:`_read_only_binds`) that lie under /tmp, which
    each sandbox replaces by a fresh tmpfs: an environment in a checkout under /tmp (a CI clone)."""
    folders = [p for p in dict.fromkeys([sys.base_prefix, sys.prefix]) if Path(p).exists()]
    return [p for p in folders if Path(p).is_relative_to("/tmp")]


def zygote_command(env: dict[str, str], cgroup_parents: list[Path],
                   cache_directory: Path = DEFAULT_CACHE_DIRECTORY) -> list[str]:
    """The outer sandbox of the zygote (:mod:`zygote`): the view every submission gets (the read-only
    system, the environment and this package, no course directory, no network), as root with
    :data:`ZYGOTE_CAPABILITIES`, and the slots' cgroups bound for its sandboxes to enter.  Its PID
    namespace is the host's, so the grader can hold and kill each sandbox by a pidfd."""
    size = str(1 << 20)  # the zygote writes nothing; each sandbox mounts its own folders over these
    command = [BWRAP, "--unshare-net", "--unshare-ipc", "--unshare-uts", "--die-with-parent", "--new-session",
               "--proc", "/proc", "--dev", "/dev",
               "--perms", "1777", "--size", size, "--tmpfs", "/tmp",
               *_read_only_binds(),
               "--perms", "0777", "--size", size, "--tmpfs", "/submission"]
    for path in matplotlib_cache(cache_directory).glob("fontlist-*.json"):
        command += ["--ro-bind", str(path), f"{FONT_MOUNTS}/{path.name}"]
    kept = under_tmp()
    for index, path in enumerate(kept):
        command += ["--ro-bind", path, f"{KEPT_MOUNTS}/{index}"]
    for index, path in enumerate(cgroup_parents):
        command += ["--bind", str(path), f"{CGROUP_MOUNTS}/{index}"]
    command += ["--remount-ro", "/", "--clearenv"]
    for key, value in {**env, KEPT_ENV: json.dumps(kept)}.items():
        command += ["--setenv", key, value]
    command += ["--cap-drop", "ALL"]  # bwrap run by root keeps every capability unless told otherwise
    for capability in ZYGOTE_CAPABILITIES:
        command += ["--cap-add", capability]
    return command + ["--chdir", "/", os.path.join(sys.prefix, "bin", "python"), "-m", "rlhf_course.grading.sandbox.zygote"]


def limited_command(command: list[str], limits: Limits, cgroup_procs: list[Path]) -> list[str]:
    """``command`` entered into the slot's cgroups and started under rlimits, with no Python
    between fork and exec (``preexec_fn`` can deadlock in a threaded parent)."""
    enter = 'for f in "$@"; do [ "$f" = -- ] && { shift; break; }; echo $$ > "$f" || exit 97; shift; done; exec "$@"'
    rlimits = [PRLIMIT, f"--as={limits.memory_bytes}", f"--cpu={limits.cpu_seconds}",
               f"--fsize={limits.file_bytes}", f"--nproc={limits.processes}", "--core=0", "--"]
    return ["/bin/sh", "-c", enter, "sh", *map(str, cgroup_procs), "--", *rlimits, *command]


# ----------------------------------------------------------------------------- replies

def claim_slot(preferred: int) -> tuple[int, int]:
    """Claim a sandbox slot (its uid and cgroups) for this machine: an exclusive ``flock`` on
    the slot's lock file, the preferred slot first, else the lowest free one.  Two graders on
    one machine (two courses, two test runs, two Dask workers whose addresses hash alike) then
    never share a uid, so one's clean-up can never kill the other's sandbox.  Returns
    ``(slot, fd)``; closing ``fd`` releases the slot (the kernel does it if the grader dies)."""
    SLOT_LOCKS.mkdir(mode=0o700, parents=True, exist_ok=True)
    for slot in [preferred % SLOT_COUNT] + [k for k in range(SLOT_COUNT) if k != preferred % SLOT_COUNT]:
        fd = os.open(SLOT_LOCKS / f"slot-{slot}.lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            continue
        return slot, fd
    raise RuntimeError(f"all {SLOT_COUNT} sandbox slots of this machine are in use")


def processes_of(uid: int) -> list[int]:
    pids = []
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                if entry.stat().st_uid == uid:
                    pids.append(int(entry.name))
            except OSError:
                pass
    return pids


def wait_until_gone(uid: int, seconds: float = 10.0) -> None:
    """Kill and wait out every process of a sandbox uid, so that the next sandbox of this slot
    starts with its whole process allowance (a dying fork bomb still counts against it)."""
    deadline = time.monotonic() + seconds
    pause = 0.002  # a killed interpreter is usually gone within milliseconds: poll fast, then back off
    while time.monotonic() < deadline:
        pids = processes_of(uid)
        if not pids:
            return
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        time.sleep(pause)
        pause = min(pause * 2, 0.05)


# ----------------------------------------------------------------------------- zygotes

class ZygoteFailed(Exception):
    def __init__(self, message: str, log: str = ""):
        super().__init__(message)
        self.log = log


class Supervisor:
    """A sandbox's supervisor as the grader holds it: a pidfd and the three pipes (``Popen``'s names)."""

    def __init__(self, pidfd: int, stdin: int, stdout: int, stderr: int):
        self.pidfd = pidfd
        self.stdin = open(stdin, "wb")
        self.stdout, self.stderr = open(stdout, "rb", buffering=0), open(stderr, "rb", buffering=0)
        self.returncode: int | None = None

    def poll(self) -> int | None:
        """None while it runs; afterwards -1 (its exit status goes to the zygote, not to us)."""
        if self.returncode is None and select.select([self.pidfd], [], [], 0)[0]:
            self.returncode = -1
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        if self.returncode is None:
            if not select.select([self.pidfd], [], [], timeout)[0]:
                raise subprocess.TimeoutExpired("sandbox", timeout)
            self.returncode = -1
        return self.returncode

    def kill(self) -> None:
        """SIGKILL: it is PID 1 of the sandbox's PID namespace, so every process of the sandbox dies with it."""
        try:
            signal.pidfd_send_signal(self.pidfd, signal.SIGKILL)
        except ProcessLookupError:
            pass

    def close(self) -> None:
        for stream in (self.stdin, self.stdout, self.stderr):
            try:
                stream.close()
            except OSError:
                pass
        if self.pidfd >= 0:
            os.close(self.pidfd)
            self.pidfd = -1


class Zygote:
    """The zygote of this grading process (:mod:`zygote`): torch imported once, one fresh sandbox forked
    per submission, for every slot.  Started on the first request, restarted if it died; one request at
    a time (a fork: milliseconds)."""

    def __init__(self):
        self._lock = threading.Lock()
        self.process: subprocess.Popen | None = None
        self._control: socket.socket | None = None
        self._log = None
        self._ready = False
        self.cache_directory: Path | None = None  # the font cache the running zygote binds

    def _launch(self, cache_directory: Path) -> None:
        """Start the zygote's process (bwrap dies with the thread that starts it: call from one that lasts)."""
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self._log = tempfile.TemporaryFile()
        self._ready = False
        try:
            self.process = subprocess.Popen(zygote_command(sandbox_env(), CGROUPS.parents(), cache_directory), stdin=theirs,
                                            stdout=self._log, stderr=self._log, start_new_session=True)
        finally:
            theirs.close()
        self._control = ours
        self.cache_directory = Path(cache_directory)

    def _await_ready(self, limits: Limits) -> None:
        self._control.settimeout(limits.startup_seconds)
        try:
            ready = self._control.recv(1 << 10)
        except OSError:
            ready = b""
        if ready != b'{"ready": true}':
            log = self.log()
            self._stop()
            raise ZygoteFailed("the zygote did not start", log)
        self._ready = True

    def _running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def log(self) -> str:
        if self._log is None:
            return ""
        self._log.seek(0, os.SEEK_END)
        self._log.seek(max(0, self._log.tell() - 4000))
        return self._log.read().decode(errors="replace")

    def _current(self, cache_directory: Path) -> bool:
        return self._running() and self.cache_directory == Path(cache_directory)

    def prestart(self, cache_directory: Path = DEFAULT_CACHE_DIRECTORY) -> None:
        """Start the zygote's process now, if it is not running; it imports torch while the caller goes on
        (the first sandbox waits until it is ready).  ``cache_directory``: the course's
        ``TrustedGrading.cache_directory``, whose font list every sandbox reads."""
        with self._lock:
            if not self._current(cache_directory):
                self._stop()
                self._launch(cache_directory)

    def spawn(self, slot: int, limits: Limits, cache_directory: Path = DEFAULT_CACHE_DIRECTORY) -> Supervisor:
        """A fresh sandbox for ``slot`` (its uid and cgroups, which the caller holds); its pipes come
        straight to us, never through the zygote."""
        down_r, down_w = os.pipe()
        up_r, up_w = os.pipe()
        log_r, log_w = os.pipe()
        request = {"slot": slot, "uid": FIRST_UID + slot, "workspace_bytes": limits.workspace_bytes,
                   "memory_bytes": limits.memory_bytes, "cpu_seconds": limits.cpu_seconds,
                   "file_bytes": limits.file_bytes, "processes": limits.processes}
        try:
            with self._lock:
                if not self._current(cache_directory):  # none yet, died, or another course's cache
                    self._stop()
                    self._launch(cache_directory)
                if not self._ready:
                    self._await_ready(limits)
                self._control.settimeout(limits.startup_seconds)
                try:
                    socket.send_fds(self._control, [json.dumps(request).encode()], [down_r, up_w, log_w])
                    reply, fds, _, _ = socket.recv_fds(self._control, 1 << 12, 1)
                except OSError as exc:
                    log = self.log()
                    self._stop()
                    raise ZygoteFailed(f"the zygote did not answer ({exc})", log) from None
        except BaseException:
            for fd in (down_w, up_r, log_r):
                os.close(fd)
            raise
        finally:
            for fd in (down_r, up_w, log_w):
                os.close(fd)
        if len(fds) != 1:
            for fd in (*fds, down_w, up_r, log_r):
                os.close(fd)
            why = reply.decode(errors="replace")[:1000] or "it is gone"
            raise ZygoteFailed(f"the zygote could not start a sandbox: {why}", self.log())
        return Supervisor(fds[0], down_w, up_r, log_r)

    def _stop(self) -> None:
        if self._control is not None:
            self._control.close()  # the zygote reads the end and exits
            self._control = None
        if self.process is not None:
            try:
                self.process.wait(timeout=2)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()
            self.process = None
        if self._log is not None:
            self._log.close()
            self._log = None

    def stop(self) -> None:
        """Stop the zygote (a later request starts a new one)."""
        with self._lock:
            self._stop()


ZYGOTE = Zygote()
atexit.register(ZYGOTE.stop)


class Sandbox:
    """One sandboxed runner for one submission; use as a context manager.

    ``deadline`` (``time.monotonic()``) is the submission's budget: no request waits past it.
    ``cache_directory``: the course's ``TrustedGrading.cache_directory`` (:func:`matplotlib_cache`).
    """

    def __init__(self, job: dict, slot: int = 0, limits: Limits = Limits(), deadline: float | None = None,
                 cache_directory: Path = DEFAULT_CACHE_DIRECTORY):
        self.job, self.preferred_slot, self.limits = job, slot, limits
        self.cache_directory = Path(cache_directory)
        self.deadline = deadline if deadline is not None else time.monotonic() + limits.submission_seconds
        self.slot: int | None = None  # the slot actually claimed (see claim_slot), while claimed
        self._slot_fd: int | None = None
        self.process: Supervisor | None = None
        self._log = collections.deque(maxlen=64)  # the last few KiB of the sandbox's stderr
        self._log_bytes = 0  # read from the sandbox's stderr so far: at most limits.log_bytes + 1
        self._log_ended = False
        self._oom_before = 0

    @staticmethod
    def unavailable() -> str | None:
        """None when sandboxes can run on this machine, else why not."""
        return sandbox_available()

    def __enter__(self) -> "Sandbox":
        if self.process is None:
            self.start()
        return self

    def start(self) -> "Sandbox":
        """Claim a slot, fork a fresh sandbox for it from the zygote, hand it the job, wait until it is ready."""
        self.slot, self._slot_fd = claim_slot(self.preferred_slot)
        self.uid = FIRST_UID + self.slot
        try:
            wait_until_gone(self.uid)  # a grader that died without cleaning up leaves its slot's processes
            CGROUPS.prepare(self.slot, self.limits)
            self._oom_before = CGROUPS.out_of_memory_events(self.slot)
            self.process = ZYGOTE.spawn(self.slot, self.limits, self.cache_directory)
        except ZygoteFailed as exc:
            self._release_slot()
            raise SandboxDied(f"the sandbox could not start: {exc}", exc.log) from None
        except BaseException:
            self._release_slot()
            raise
        try:
            self.request(protocol.job_request(self.job), READY, 16, self.limits.startup_seconds, "startup")
        except BaseException:
            self.kill()
            raise
        return self

    def __exit__(self, *exc) -> None:
        self.kill()

    def kill(self) -> None:
        if self.process and self.process.poll() is None:
            self.process.kill()
        if self.process:
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass
            for stream in (self.process.stdin, self.process.stdout, self.process.stderr):
                try:
                    stream.close()
                except OSError:
                    pass
            if isinstance(self.process, Supervisor):  # (tests play the sandbox with a plain Popen)
                self.process.close()
        if self._slot_fd is not None:
            CGROUPS.kill_all(self.slot)
            wait_until_gone(self.uid)
            self._release_slot()

    def _release_slot(self) -> None:
        """Give the slot back; after this, nothing of this object touches that uid or cgroup."""
        if self._slot_fd is not None:
            os.close(self._slot_fd)
            self._slot_fd = None

    def log(self) -> str:
        return b"".join(self._log).decode(errors="replace")[-4000:]

    # -- protocol ------------------------------------------------------------------------

    def _send(self, payload: bytes) -> None:
        try:
            self.process.stdin.write(protocol.frame(payload))
            self.process.stdin.flush()
        except (BrokenPipeError, OSError):
            raise self._died() from None

    # The log is read only up to limits.log_bytes: each byte costs this process (root, in no cgroup) CPU, and a
    # sandbox could write for as long as its budget lasts.  Past the limit the sandbox is stopped.

    def _read_log(self, fd: int) -> bool:
        """Read what the sandbox's stderr holds now (one read); False at its end or past the log limit."""
        chunk = os.read(fd, min(1 << 16, max(1, self.limits.log_bytes + 1 - self._log_bytes)))
        self._log_bytes += len(chunk)
        if chunk:
            self._log.append(chunk[-4096:])
        else:
            self._log_ended = True  # never selected again: an ended pipe is always "ready"
        return bool(chunk) and self._log_bytes <= self.limits.log_bytes

    def _log_flooded(self) -> bool:
        return self._log_bytes > self.limits.log_bytes

    def _drain_log(self) -> None:
        fd = self.process.stderr.fileno()
        while not self._log_flooded() and not self._log_ended and select.select([fd], [], [], 0)[0]:
            if not self._read_log(fd):
                return

    def _recv_exactly(self, size: int, deadline: float, budget: str) -> bytes:
        out_fd, err_fd = self.process.stdout.fileno(), self.process.stderr.fileno()
        chunks, remaining = [], size
        while remaining:
            left = deadline - time.monotonic()
            if left <= 0:
                self.kill()
                raise SandboxTimeout(budget)
            ready, _, _ = select.select([out_fd] if self._log_ended else [out_fd, err_fd], [], [], left)
            if err_fd in ready and not self._read_log(err_fd) and self._log_flooded():
                self.kill()
                raise ProtocolViolation(log_flood_message(self.limits), self.log())
            if out_fd in ready:
                chunk = os.read(out_fd, min(remaining, 1 << 20))
                if not chunk:
                    raise self._died()
                chunks.append(chunk)
                remaining -= len(chunk)
        return b"".join(chunks)

    def _died(self) -> SandboxDied:
        try:
            self.process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.kill()
        self._drain_log()
        code = self.process.poll()
        oom = self._slot_fd is not None and CGROUPS.out_of_memory_events(self.slot) > self._oom_before
        why = "the sandbox closed its pipe" if code is None else "the sandbox ended"
        return SandboxDied(why + (" (memory limit)" if oom else ""), self.log(), out_of_memory=oom)

    def request(self, payload: bytes, kind: bytes, cap: int, seconds: float, budget: str = "call") -> bytes:
        """Send one request (a frame's payload, its kind byte first); return the reply's body (without its kind byte).  The reply must be
        of ``kind`` and at most ``cap`` bytes, and arrive within ``seconds`` and the budget."""
        self._send(payload)
        return self._receive(kind, cap, time.monotonic() + seconds, budget)

    def _receive(self, kind: bytes, cap: int, deadline: float, budget: str) -> bytes:
        """The next reply's body: of ``kind``, at most ``cap`` bytes, by ``deadline`` and the budget."""
        if self.deadline < deadline:
            deadline, budget = self.deadline, "submission"
        (size,) = protocol.HEADER.unpack(self._recv_exactly(protocol.HEADER.size, deadline, budget))
        if size > cap + 1 or size == 0:
            self.kill()
            raise ProtocolViolation(f"the sandbox announced a reply of {size} bytes (cap {cap + 1})", self.log())
        reply = self._recv_exactly(size, deadline, budget)
        if reply[:1] == FAILED and kind != FAILED:
            raise SandboxDied(f"the runner failed: {reply[1:2000].decode(errors='replace')}", self.log())
        if reply[:1] != kind:
            self.kill()
            raise ProtocolViolation(f"expected a reply of kind {kind!r}, got {reply[:1]!r}", self.log())
        return reply[1:]

    # -- the runner's requests -------------------------------------------------------------

    def feedback(self) -> bytes:
        """The student's notebook, executed in a fresh child process, as JSON bytes."""
        return self.request(protocol.FEEDBACK, NOTEBOOK, self.limits.notebook_bytes,
                            self.limits.feedback_seconds, "feedback")

    def define(self) -> dict[str, str]:
        """Start the child that runs the answer cells; return the cells that raised."""
        body = self.request(protocol.DEFINE, DEFINED, 64 * 1024, self.limits.startup_seconds, "startup")
        try:
            return protocol.decode_defined(body)
        except ValueError:
            self.kill()
            raise ProtocolViolation("malformed definition report", self.log()) from None

    # Calls are pipelined: several requests sent before their replies are read (the runner answers
    # them in order).  The caller keeps the bytes sent and not yet answered under PIPELINE_BYTES, so
    # sending never blocks on a full pipe while the runner blocks on replies nobody reads.

    def send_call(self, request: bytes) -> None:
        """Send one call request (from :func:`encode_call_request`) without waiting for its reply."""
        self._send(request)

    def receive_call(self, since: float) -> bytes:
        """The reply to the oldest call not yet answered.  It must arrive within ``call_seconds`` of
        ``since``: when the runner could start on it (its sending, or the previous reply's arrival)."""
        return self._receive(OBSERVATION, self.limits.reply_bytes, since + self.limits.call_seconds, "call")


def encode_call_request(function: str, args: list, grad_wrt: list) -> bytes:
    """One call request's frame payload (its size counts against ``protocol.PIPELINE_BYTES``, plus the header)."""
    return protocol.CALL + encode_call(function, list(args), list(grad_wrt))
