"""A lab's turn in the machine's training queue: at most K training runs at once on a shared machine.

On the hub (`make hub`) the classroom runs a broker of root's (rlhf_course/classroom/training_broker.py) on a
Unix socket and gives every server its path (``RLHF_TRAINING_BROKER``); without it (a laptop, a test) there is
no queue and the lab trains at once.

* The lab connects and waits for ``granted``, telling the notebook its place while it waits ("waiting for a
  training slot: 3 ahead"); it holds the slot while the connection is open, and frees it by closing it (the
  end of the training, an interrupt, the kernel's death).  The broker keeps the order and ends a hold that
  lasts too long; nothing here decides who goes first.
* Nobody waits for ever, and nobody leaves a queue that moves: the lab waits as long as its place keeps
  improving, and trains without a slot once its place has not moved for ``RLHF_TRAINING_SLOT_WAIT`` seconds
  (:data:`DEFAULT_MAX_WAIT`: a stalled queue); so it does when the broker cannot be reached.  Leaving a moving
  queue helps nobody: a class whose late trainings all left it after a fixed wait trained them all at once, each at
  a fraction of a core, and finished later than the queue would have (bench/RESULTS.md, the burst of 30).
* A user's own other request is no way around the queue: when the broker refuses (another training of the same
  user holds that user's one ticket, or she asks faster than the broker takes), the lab says so and asks again
  every :data:`RETRY_SECONDS` until it has a ticket, then waits in turn like any other.  That wait is not a
  stalled queue's, so it counts nothing towards ``RLHF_TRAINING_SLOT_WAIT``; it ends when her other ticket does,
  which a lab's own ends within a wait and a hold (the broker ends any grant after its hold).

The queue orders trainings, it does not limit them: each user's cgroup quota is what bounds them
(rlhf_course/classroom/spawner.py).
"""
from __future__ import annotations

import contextlib
import os
import socket
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator

from rlhf_course.i18n import t
from rlhf_course.training_notice import training_in_this_kernel

BROKER_VARIABLE = "RLHF_TRAINING_BROKER"
MAX_WAIT_VARIABLE = "RLHF_TRAINING_SLOT_WAIT"
DEFAULT_MAX_WAIT = 180.0  # seconds without the place moving: longer than a slot's turn, shorter than a stall
RETRY_SECONDS = 2.0  # between two asks while refused: a quarter of the rate the broker takes a user's tickets at
REFUSED = "Another training of yours holds your place in the queue: this one waits for it to end, then takes its turn"


@dataclass
class TrainingQueue:
    """The broker listening on ``broker`` (a Unix socket), waited for as long as the place it gives moves, at most
    ``max_wait`` seconds without a move."""
    broker: Path
    max_wait: float = DEFAULT_MAX_WAIT
    retry_seconds: float = RETRY_SECONDS

    @classmethod
    def from_environment(cls, environ=None) -> "TrainingQueue | None":
        """The queue the hub configured (``RLHF_TRAINING_BROKER``), or None: none set, or a wait that is not a
        number (a laptop never waits)."""
        environ = os.environ if environ is None else environ
        broker = environ.get(BROKER_VARIABLE, "")
        try:
            max_wait = float(environ.get(MAX_WAIT_VARIABLE) or DEFAULT_MAX_WAIT)
        except ValueError:
            return None
        return cls(Path(broker), max_wait) if broker else None

    @contextlib.contextmanager
    def slot(self, say: Callable[[str], None] | None = None) -> Iterator[bool]:
        """Hold a training slot for the ``with`` block (True), waiting in turn and telling ``say`` (one line
        per change, in the notebook's language: :func:`rlhf_course.i18n.t`); False when it trains without
        one (its place still for ``max_wait``, or no broker to reach)."""
        request = BrokerRequest(self.broker, self.retry_seconds)
        try:
            held = self._wait(request, say or _say)
            if not held:  # its ticket given back before it trains: no grant while it trains without one
                request.close()
            yield held
        finally:
            request.close()

    def _wait(self, request: "BrokerRequest", say: Callable[[str], None]) -> bool:
        started, shown, refused = time.monotonic(), None, False
        last_move = started  # when the place last improved, or her own other ticket let her in: the limit counts from there
        for words in request.lines(lambda: last_move + self.max_wait):
            if words[:1] == ["granted"]:
                if shown is not None or refused:
                    say(t("Got a training slot after {seconds:.0f} s: training now",
                          seconds=time.monotonic() - started))
                return True
            if words[:1] == ["refused"]:
                if not refused:
                    say(t(REFUSED))
                refused, shown = True, None
                last_move = time.monotonic() + request.retry_seconds  # her own ticket's wait is not a stall
            if words[:1] == ["queued"] and len(words) == 3 and words[1] != shown:
                if shown is not None and int(words[1]) < int(shown):
                    last_move = time.monotonic()
                shown = words[1]
                say(t("Waiting for a training slot: {ahead} ahead (the machine trains {slots} at a time)",
                      ahead=int(words[1]), slots=int(words[2])))
        still = time.monotonic() - last_move
        if still >= self.max_wait:
            say(t("The training queue has not moved for {still:.0f} s (you waited {seconds:.0f} s): training now without a slot",
                  still=still, seconds=time.monotonic() - started))
        return False


class BrokerRequest:
    """A request in a queue's broker (rlhf_course/classroom/training_broker.py), asked again every
    ``retry_seconds`` while the broker refuses it: the user's one ticket is another request of hers, so this one
    waits for it rather than run without a turn.  The connection that holds the ticket is :attr:`connection`."""

    def __init__(self, broker: Path, retry_seconds: float = RETRY_SECONDS):
        self.broker, self.retry_seconds = broker, retry_seconds
        self.connection: socket.socket | None = None

    def lines(self, deadline: Callable[[], float] | None) -> Iterator[list[str]]:
        """The broker's lines, split in words, each refusal among them (then, ``retry_seconds`` later, the lines of
        the next ask); until ``deadline()`` (as :func:`broker_lines`), the broker closes, or it cannot be reached."""
        while True:
            self.close()
            self.connection = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                self.connection.connect(str(self.broker))
            except OSError:
                return
            for words in broker_lines(self.connection, deadline):
                yield words
                if words[:1] == ["refused"]:
                    break
            else:
                return
            self.close()
            time.sleep(self.retry_seconds)

    def close(self) -> None:
        if self.connection is not None:
            self.connection.close()


def broker_lines(connection: socket.socket, deadline: Callable[[], float] | None) -> Iterator[list[str]]:
    """The broker's lines, split in words, until ``deadline()`` (time.monotonic(), read again after every line;
    None: no deadline) or the broker closes."""
    pending = b""
    while True:
        while b"\n" in pending:
            line, pending = pending.split(b"\n", 1)
            yield line.decode("ascii", "replace").split()
        remaining = None if deadline is None else deadline() - time.monotonic()
        if remaining is not None and remaining <= 0:
            return
        connection.settimeout(remaining)
        try:
            chunk = connection.recv(4096)
        except (TimeoutError, OSError):
            return
        if not chunk:
            return
        pending += chunk


def _say(line: str) -> None:
    print(line, file=sys.stdout, flush=True)


@contextlib.contextmanager
def training_slot(queue: "TrainingQueue | None" = None, say: Callable[[str], None] | None = None) -> Iterator[bool]:
    """The labs' training entry points train inside this: ``queue``'s slot, by default the queue the
    environment names; without one, at once (False).  While it waits and trains, the kernel's explorers say that
    their sliders wait (:mod:`rlhf_course.training_notice`)."""
    queue = queue if queue is not None else TrainingQueue.from_environment()
    with training_in_this_kernel():
        if queue is None:
            yield False
            return
        with queue.slot(say) as held:
            yield held
