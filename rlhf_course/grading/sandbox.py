"""A bubblewrap sandbox for student code, and the trusted side of its pipe protocol.

Inside: no network (own network namespace), own PID namespace (everything dies with it), a
read-only view of the system, the Python environment and this package only (no course
directory, gradebook, other students or environment secrets), the submission copy as the
only writable place, an unprivileged uid, and rlimits on address space, CPU time, file size
and process count.  The trusted side adds a wall-clock limit per call and in total, and kills
the whole process group when it is reached (a loop that ignores SIGINT included).
"""
from __future__ import annotations

import io
import json
import os
import resource
import select
import shutil
import signal
import struct
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import torch

import rlhf_course

BWRAP = shutil.which("bwrap") or "/usr/bin/bwrap"
SETPRIV = shutil.which("setpriv") or "/usr/bin/setpriv"
FIRST_UID = 61000  # sandbox uids are FIRST_UID + worker slot: process limits count per uid


@dataclass(frozen=True)
class Limits:
    memory_bytes: int = 4 * 2**30      # address space; torch alone maps about 1.5 GiB of it
    cpu_seconds: int = 300
    file_bytes: int = 64 * 2**20
    processes: int = 64
    startup_seconds: float = 60.0      # interpreter, torch, and the student's cell definitions
    call_seconds: float = 15.0         # one call of a student function
    feedback_seconds: float = 120.0    # running the whole notebook for the feedback copy


class SandboxTimeout(Exception):
    pass


class SandboxDied(Exception):
    def __init__(self, message: str, log: str):
        super().__init__(message)
        self.log = log


def sandbox_available() -> str | None:
    """None when the sandbox can run here, else why not."""
    for tool in (BWRAP, SETPRIV):
        if not Path(tool).exists():
            return f"{tool} is missing (Debian packages bubblewrap and util-linux)"
    if os.geteuid() != 0:
        return "the grader must run as root to start sandboxes under unprivileged uids"
    return None


def _read_only_binds() -> list[str]:
    paths = [p for p in dict.fromkeys(["/usr", "/lib", "/lib64", "/bin", "/etc/alternatives", "/etc/fonts",
                                       sys.base_prefix, sys.prefix, str(Path(rlhf_course.__file__).parent)])
             if Path(p).exists()]
    # Parent folders bwrap would create for the mount points are made traversable (and
    # empty): the unprivileged uid inside must reach /root/.pyenv/... without seeing /root.
    parents = sorted({str(a) for p in paths for a in Path(p).parents if str(a) != "/"}, key=len)
    binds = []
    for parent in parents:
        binds += ["--perms", "0755", "--dir", parent]
    for path in paths:
        binds += ["--ro-bind", path, path]
    return binds


def matplotlib_cache() -> Path:
    """A font cache built once by the trusted side and shared read-only with every sandbox
    (building it takes a second or two, in every fresh sandbox otherwise)."""
    cache = Path(os.environ.get("RLHF_GRADING_CACHE", Path.home() / ".cache" / "rlhf-course")) / "matplotlib"
    if not any(cache.glob("fontlist-*.json")):
        cache.mkdir(parents=True, exist_ok=True)
        subprocess.run([sys.executable, "-c", "import matplotlib.font_manager"], check=True,
                       env=dict(os.environ, MPLCONFIGDIR=str(cache)), capture_output=True)
    return cache


def _font_cache_binds() -> list[str]:
    # matplotlib wants a writable config folder: a fresh one on the sandbox's /tmp, holding
    # a read-only copy of the prebuilt font list.
    binds = []
    for path in matplotlib_cache().glob("fontlist-*.json"):
        binds += ["--dir", "/tmp/matplotlib", "--ro-bind", str(path), f"/tmp/matplotlib/{path.name}"]
    return binds


def bwrap_command(workdir: Path, uid: int, env: dict[str, str]) -> list[str]:
    # Mounts apply in order: the empty /tmp comes first, so that an environment or a course
    # that itself lives below /tmp is bound on top of it rather than hidden by it.
    command = [BWRAP, "--unshare-pid", "--unshare-net", "--unshare-ipc", "--unshare-uts",
               "--unshare-cgroup-try", "--die-with-parent", "--new-session",
               "--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp",
               *_read_only_binds(),
               *_font_cache_binds(),
               "--bind", str(workdir), "/submission",
               "--remount-ro", "/", "--clearenv"]
    for key, value in env.items():
        command += ["--setenv", key, value]
    command += ["--chdir", "/submission",
                SETPRIV, f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "--inh-caps=-all",
                "--bounding-set=-all", "--no-new-privs",
                os.path.join(sys.prefix, "bin", "python"), "-m", "rlhf_course.grading.sandbox_runner"]
    return command


def apply_rlimits(limits: Limits) -> None:
    """Address space, CPU time, file size, process count and no core files, for this process and
    everything it starts (called in the child between fork and exec)."""
    resource.setrlimit(resource.RLIMIT_AS, (limits.memory_bytes, limits.memory_bytes))
    resource.setrlimit(resource.RLIMIT_CPU, (limits.cpu_seconds, limits.cpu_seconds))
    resource.setrlimit(resource.RLIMIT_FSIZE, (limits.file_bytes, limits.file_bytes))
    resource.setrlimit(resource.RLIMIT_NPROC, (limits.processes, limits.processes))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


class Sandbox:
    """One sandboxed runner for one submission copy; use as a context manager."""

    def __init__(self, workdir: Path, job: dict, slot: int = 0, limits: Limits = Limits()):
        self.workdir, self.limits, self.uid = workdir, limits, FIRST_UID + slot
        (workdir / "job.json").write_text(json.dumps(job))
        for path in [workdir, *workdir.rglob("*")]:
            # lchown: a student's symlink must never hand its target (say, the gradebook) to the sandbox uid
            os.chown(path, self.uid, self.uid, follow_symlinks=False)
        self.log_path = workdir.parent / f"{workdir.name}.sandbox.log"
        env = {"HOME": "/submission", "PATH": f"{sys.prefix}/bin:/usr/bin:/bin", "NBGRADER_EXECUTION": "autograde",
               "MPLCONFIGDIR": "/tmp/matplotlib", "MPLBACKEND": "module://matplotlib_inline.backend_inline", "OMP_NUM_THREADS": "1", "PYTHONDONTWRITEBYTECODE": "1"}
        self.command = bwrap_command(workdir, self.uid, env)
        self.process: subprocess.Popen | None = None

    def __enter__(self) -> "Sandbox":
        if self.process is None:
            self.start()
        return self

    def start(self) -> "Sandbox":
        """Start the runner and wait until the student's answer cells are defined."""
        self._log = open(self.log_path, "wb")
        self.process = subprocess.Popen(self.command, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                        stderr=self._log, preexec_fn=lambda: apply_rlimits(self.limits), start_new_session=True)
        try:  # wait for the interpreter, torch and the student's cell definitions
            self.request({"kind": "ping"}, self.limits.startup_seconds)
        except BaseException:
            self.kill()
            raise
        return self

    def __exit__(self, *exc) -> None:
        self.kill()

    def kill(self) -> None:
        if self.process and self.process.poll() is None:
            try:
                os.killpg(self.process.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        if self.process:
            self.process.wait()
        if not self._log.closed:
            self._log.close()

    def log(self) -> str:
        self._log.flush()
        return self.log_path.read_text(errors="replace")[-4000:]

    # -- protocol ------------------------------------------------------------------------

    def _send(self, payload: bytes) -> None:
        try:
            self.process.stdin.write(struct.pack("<Q", len(payload)) + payload)
            self.process.stdin.flush()
        except (BrokenPipeError, OSError):
            raise SandboxDied(self._death(), self.log()) from None

    def _recv_exactly(self, size: int, deadline: float) -> bytes:
        fd, chunks, remaining = self.process.stdout.fileno(), [], size
        while remaining:
            left = deadline - time.monotonic()
            if left <= 0:
                self.kill()
                raise SandboxTimeout()
            ready, _, _ = select.select([fd], [], [], left)
            if not ready:
                continue
            chunk = os.read(fd, min(remaining, 1 << 20))
            if not chunk:
                self.process.wait()
                raise SandboxDied(self._death(), self.log())
            chunks.append(chunk)
            remaining -= len(chunk)
        return b"".join(chunks)

    def _death(self) -> str:
        code = self.process.poll()
        if code is None:
            return "the sandbox closed its pipe"
        return f"the sandbox exited with status {code}"

    def request(self, payload: dict, seconds: float) -> bytes:
        buffer = io.BytesIO()
        torch.save(payload, buffer)
        self._send(buffer.getvalue())
        deadline = time.monotonic() + seconds
        (size,) = struct.unpack("<Q", self._recv_exactly(8, deadline))
        return self._recv_exactly(size, deadline)
