"""A machine-wide queue for the labs' training: at most K training runs at once on a shared machine.

On the hub (`make hub`) forty students share two cores, each under a one-core quota of their own.  When
many press the training cell together, every one of them trains at a fraction of a core and all finish
late (issue #37: the cell's p95 five times its time alone); in turn, each trains at full speed and the
early ones are done early.  The hub creates a folder for the queue (root's, world-writable and sticky,
``RLHF_TRAINING_SLOT_DIR``) holding K slot files (``RLHF_TRAINING_SLOTS``, from its cores and each user's
CPU quota) and gives every server both variables; without them (a laptop, a test) there is no queue.

* A slot is an exclusive ``flock`` on one of the K files: held while the lab trains, freed when it ends,
  is interrupted, or its process dies (the kernel frees a dead process's locks), whoever the user.
* A waiter holds a lock on a ticket of its own (``wait-<nanoseconds>-<pid>-<random>``): the tickets before
  it whose lock is held are the waiters ahead, shown in the cell ("waiting for a training slot: 3 ahead");
  a ticket no process holds any more is skipped.  A waiter takes a free slot when fewer waiters are ahead
  of it than slots are free: first come, first served.
* Nobody waits for ever: after ``RLHF_TRAINING_SLOT_WAIT`` seconds (:data:`DEFAULT_MAX_WAIT`) the lab trains
  without a slot, so a student who holds slots (a long run, a process that keeps a lock) cannot stop the
  class; nor can a full folder or one the user cannot open (then: no queue).

The queue is cooperation, not enforcement: each user's cgroup quota is what bounds them
(rlhf_course/classroom/spawner.py).
"""
from __future__ import annotations

import contextlib
import fcntl
import os
import secrets
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator

from rlhf_course.i18n import t

FOLDER_VARIABLE = "RLHF_TRAINING_SLOT_DIR"
SLOTS_VARIABLE = "RLHF_TRAINING_SLOTS"
MAX_WAIT_VARIABLE = "RLHF_TRAINING_SLOT_WAIT"
DEFAULT_MAX_WAIT = 180.0  # seconds: a class's queue behind two slots, never one student's hold for long
TICKET_PREFIX = "wait-"


def slot_path(folder: Path, index: int) -> Path:
    return folder / f"slot-{index}"


def default_slots(cpus: int, cpu_limit: float | None) -> int:
    """K for a machine of ``cpus`` cores whose users may each use ``cpu_limit`` cores: as many trainings
    as the cores hold at each one's full quota, at least one."""
    if not cpu_limit or cpu_limit <= 0:
        return max(1, cpus)
    return max(1, int(cpus // cpu_limit))


def create_folder(folder: Path, slots: int) -> None:
    """The queue's folder as the hub makes it (root): world-writable and sticky (anyone adds a ticket, only
    its owner removes it), with the K slot files, read-only to users (a read-only descriptor takes a lock)."""
    folder.mkdir(mode=0o755, parents=True, exist_ok=True)
    folder.chmod(0o1777)
    for index in range(slots):
        path = slot_path(folder, index)
        path.touch(mode=0o644, exist_ok=True)
        path.chmod(0o644)


def _try_lock(path: Path, flags: int) -> int | None:
    """A descriptor of ``path`` holding the lock ``flags`` (without waiting), or None: held by another
    process, missing, or not ours to open."""
    try:
        descriptor = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError:
        return None
    try:
        fcntl.flock(descriptor, flags | fcntl.LOCK_NB)
        return descriptor
    except OSError:
        os.close(descriptor)
        return None


def _unlock(descriptor: int) -> None:
    with contextlib.suppress(OSError):
        fcntl.flock(descriptor, fcntl.LOCK_UN)
    os.close(descriptor)


@dataclass
class TrainingQueue:
    """The queue in ``folder``: ``slots`` trainings at once, a wait of at most ``max_wait`` seconds."""
    folder: Path
    slots: int
    max_wait: float = DEFAULT_MAX_WAIT
    poll: float = 0.25  # seconds between two looks at the slots while waiting

    @classmethod
    def from_environment(cls, environ=None) -> "TrainingQueue | None":
        """The queue the hub configured (``RLHF_TRAINING_SLOT_DIR``, ``RLHF_TRAINING_SLOTS``), or None: no
        folder set, or K not a positive number (a laptop never waits)."""
        environ = os.environ if environ is None else environ
        folder = environ.get(FOLDER_VARIABLE, "")
        try:
            slots = int(environ.get(SLOTS_VARIABLE, "1"))
            max_wait = float(environ.get(MAX_WAIT_VARIABLE) or DEFAULT_MAX_WAIT)
        except ValueError:
            return None
        if not folder or slots < 1:
            return None
        return cls(Path(folder), slots, max_wait)

    def waiters_ahead(self, ticket: str) -> int:
        """Live waiters whose ticket is older than ``ticket`` (a ticket whose lock nobody holds is skipped,
        and removed when it is ours)."""
        try:
            names = sorted(n for n in os.listdir(self.folder) if n.startswith(TICKET_PREFIX) and n < ticket)
        except OSError:
            return 0
        ahead = 0
        for name in names:
            descriptor = _try_lock(self.folder / name, fcntl.LOCK_SH)
            if descriptor is None:
                ahead += os.path.lexists(self.folder / name)  # held: a live waiter (gone meanwhile: not)
                continue
            with contextlib.suppress(OSError):  # its process died while waiting; only its owner may remove it
                os.unlink(self.folder / name)
            _unlock(descriptor)
        return ahead

    def _take_slot(self, ahead: int) -> int | None:
        """Lock a free slot if fewer waiters are ahead than slots are free: its descriptor, or None."""
        free = []
        for index in range(self.slots):
            descriptor = _try_lock(slot_path(self.folder, index), fcntl.LOCK_EX)
            if descriptor is not None:
                free.append(descriptor)
            if len(free) > ahead:
                break
        keep = free.pop() if len(free) > ahead else None
        for descriptor in free:
            _unlock(descriptor)
        return keep

    def _ticket(self) -> tuple[str, int] | None:
        name = f"{TICKET_PREFIX}{time.time_ns():020d}-{os.getpid()}-{secrets.token_hex(4)}"
        try:
            descriptor = os.open(self.folder / name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
        except OSError:
            return None
        fcntl.flock(descriptor, fcntl.LOCK_EX)
        return name, descriptor

    @contextlib.contextmanager
    def slot(self, say: Callable[[str], None] | None = None) -> Iterator[bool]:
        """Hold a training slot for the ``with`` block (True), waiting in turn and telling ``say`` (one line
        per change, in the notebook's language: :func:`rlhf_course.i18n.t`); False when it trains without
        one (waited ``max_wait``, or the folder unusable)."""
        say = say or _say
        held = self._take_slot(0) if self.waiters_ahead(f"{TICKET_PREFIX}~") == 0 else None
        if held is None:
            held = self._wait(say)
        try:
            yield held is not None
        finally:
            if held is not None:
                _unlock(held)

    def _wait(self, say: Callable[[str], None]) -> int | None:
        ticket = self._ticket()
        if ticket is None:  # the folder is not writable here: no queue
            return None
        name, descriptor = ticket
        started, shown = time.monotonic(), None
        try:
            while True:
                ahead = self.waiters_ahead(name)
                held = self._take_slot(ahead)
                waited = time.monotonic() - started
                if held is not None:
                    if shown is not None:
                        say(t("Got a training slot after {seconds:.0f} s: training now", seconds=waited))
                    return held
                if waited >= self.max_wait:
                    say(t("Waited {seconds:.0f} s for a training slot: training now without one", seconds=waited))
                    return None
                if ahead != shown:
                    say(t("Waiting for a training slot: {ahead} ahead (the machine trains {slots} at a time)",
                          ahead=ahead, slots=self.slots))
                    shown = ahead
                time.sleep(self.poll)
        finally:
            with contextlib.suppress(OSError):
                os.unlink(self.folder / name)
            _unlock(descriptor)


def _say(line: str) -> None:
    print(line, file=sys.stdout, flush=True)


@contextlib.contextmanager
def training_slot(queue: "TrainingQueue | None" = None, say: Callable[[str], None] | None = None) -> Iterator[bool]:
    """The labs' training entry points train inside this: ``queue``'s slot, by default the queue the
    environment names; without one, at once (False)."""
    queue = queue if queue is not None else TrainingQueue.from_environment()
    if queue is None:
        yield False
        return
    with queue.slot(say) as held:
        yield held
