"""The hub's and the proxy's own logs (`<base>/hub/jupyterhub.log`, `proxy.log`), bounded.

JupyterHub writes a line for every request it answers, configurable-http-proxy one for every request to its API
and every request it could not forward, and each line holds the request's path: any account can make either log a
line, up to the path's length (node takes 16 KiB of headers, tornado 64 KiB), as fast as the hub answers.  Written
straight into a file, a student's loop filled root's disk.  So the classroom hands each of these processes a pipe
instead, read by a keeper process of its own (this module, run in a session of its own) that appends the lines to
the log.  A process, not a thread of the classroom's: the hub and the proxy outlive a classroom that was killed
(SIGKILL runs no clean-up), and node ends the proxy at its first write to a pipe nobody reads any more.

* a log that would grow past ``keep_bytes`` is set aside first as ``<log>.1`` (the one before dropped), as a
  server's own log is when it starts (rlhf_course/classroom/spawner.py): two files per log, ``keep_bytes`` each
  at most.  The newest lines are always kept, and a start's failure is among them: it is written last;
* a line longer than ``line_bytes`` keeps its beginning (the time, the level, the status, the method and the start
  of the path) and says how many bytes were cut: a flood of 16 KiB paths rotates the log 8 times less often;
* a line that cannot be written (a full disk) is dropped and counted; the keeper reads on, so the hub never waits
  for its log.

    python -m rlhf_course.classroom.bounded_log LOG KEEP_BYTES LINE_BYTES   # keeps LOG for what its stdin carries
"""
from __future__ import annotations

import contextlib
import io
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

KEEP_BYTES = 64 * 1024**2  # a log set aside past this: 128 MiB at most for the hub's log, as much for the proxy's
LINE_BYTES = 2048  # longer lines are cut: a real line of the hub's or the proxy's is shorter (a traceback's too)
READ_BYTES = 64 * 1024  # a pipe's capacity: what one read takes at most


def cut_note(cut: int) -> bytes:
    """What ends a line whose last ``cut`` bytes were not written."""
    return f" [... {cut} bytes cut]\n".encode()


class BoundedLog:
    """``path`` and ``path.1``, each at most ``keep_bytes``, fed by the pipes :meth:`pipe` makes (each a child
    process's stdout and stderr) and by :meth:`write` (the classroom's own lines)."""

    def __init__(self, path: Path, keep_bytes: int = KEEP_BYTES, line_bytes: int = LINE_BYTES):
        if keep_bytes < 2 * line_bytes:
            raise ValueError(f"a log's bound ({keep_bytes} bytes) must hold two lines of {line_bytes} bytes")
        self.path, self.keep_bytes, self.line_bytes = Path(path), keep_bytes, line_bytes
        self.lock = threading.Lock()
        self.dropped = 0  # lines that could not be written (a full disk): said in the next line that could
        self.keepers: list[subprocess.Popen] = []

    @property
    def set_aside(self) -> Path:
        return self.path.with_name(self.path.name + ".1")

    def pipe(self) -> int:
        """The write end of a new pipe, for one child's stdout and stderr: close it once the child has it.  A keeper
        process appends what the pipe carries to the log, line by line, until every process holding it closed it;
        it outlives this one."""
        read_end, write_end = os.pipe()
        try:
            keeper = subprocess.Popen(
                [sys.executable, "-m", __name__, str(self.path), str(self.keep_bytes), str(self.line_bytes)],
                stdin=read_end, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        except BaseException:
            os.close(write_end)
            raise
        finally:
            os.close(read_end)
        self.keepers = [*(other for other in self.keepers if other.poll() is None), keeper]
        os.set_inheritable(write_end, True)
        return write_end

    def write(self, text: str) -> None:
        """The classroom's own lines, appended as a child's are."""
        for line in text.encode(errors="replace").splitlines(keepends=True):
            self._append(line if line.endswith(b"\n") else line + b"\n")

    def wait(self, timeout: float) -> None:
        """Until every pipe's writers have closed it and its lines are written, ``timeout`` seconds at most."""
        deadline = time.monotonic() + timeout
        for keeper in self.keepers:
            with contextlib.suppress(subprocess.TimeoutExpired):
                keeper.wait(max(0.0, deadline - time.monotonic()))

    def keep(self, read_end: int) -> None:
        """The keeper's work: what ``read_end`` carries appended to the log until its writers have all closed it."""
        self._read(read_end)

    def _read(self, read_end: int) -> None:
        with io.open(read_end, "rb", buffering=READ_BYTES) as pipe:
            while True:
                line = pipe.readline(self.line_bytes)
                if not line:
                    return
                if not line.endswith(b"\n") and len(line) == self.line_bytes:
                    line = line[:self.line_bytes - 64] + cut_note(64 + self._skip_rest(pipe))
                self._append(line)

    @staticmethod
    def _skip_rest(pipe) -> int:
        """Read and drop the rest of a line (its newline too); how many bytes of it there were."""
        skipped = 0
        while True:
            piece = pipe.readline(READ_BYTES)
            if not piece or piece.endswith(b"\n"):
                return skipped + len(piece.rstrip(b"\n"))
            skipped += len(piece)

    def _append(self, line: bytes) -> None:
        with self.lock:
            try:
                if self.dropped:
                    line = f"[{self.dropped} lines of this log were lost: the disk was full]\n".encode() + line
                self._make_room(len(line))
                with open(self.path, "ab") as log:
                    log.write(line)
                self.dropped = 0
            except OSError:
                self.dropped += 1

    def _make_room(self, size: int) -> None:
        with contextlib.suppress(FileNotFoundError):
            if os.stat(self.path).st_size + size > self.keep_bytes:
                os.replace(self.path, self.set_aside)


def mark(path: Path) -> tuple[int, int]:
    """Where a log ends now (its file and size), for :func:`tail`'s ``since``."""
    with contextlib.suppress(FileNotFoundError):
        info = os.stat(path)
        return info.st_ino, info.st_size
    return 0, 0


def tail(path: Path, since: tuple[int, int] = (0, 0), lines: int = 30) -> str:
    """The last ``lines`` lines ``path`` gained after ``since`` (a :func:`mark`; none: the log's last lines), the
    part set aside since as ``path.1`` included.  Reads no more than those lines' bytes of either file."""
    inode, offset = since
    window = lines * (LINE_BYTES + 64)  # the last lines are in these last bytes (a line is cut to LINE_BYTES)
    gained = []
    if mark(path)[0] != inode or not inode:  # set aside since (or no mark): .1 holds the lines before
        older = path.with_name(path.name + ".1")
        with contextlib.suppress(FileNotFoundError), open(older, "rb") as log:
            info = os.fstat(log.fileno())
            start = offset if inode and info.st_ino == inode else 0  # .1 is the marked file, or newer than it
            log.seek(max(start, info.st_size - window))
            gained.append(log.read())
        offset = 0
    with contextlib.suppress(FileNotFoundError), open(path, "rb") as log:
        log.seek(max(offset, os.fstat(log.fileno()).st_size - window))
        gained.append(log.read())
    return "\n".join(b"".join(gained).decode(errors="replace").splitlines()[-lines:])


if __name__ == "__main__":
    path, keep_bytes, line_bytes = sys.argv[1:]
    BoundedLog(Path(path), int(keep_bytes), int(line_bytes)).keep(sys.stdin.fileno())
