"""A Validate's turn in the class's Validate queue: at most K Validates run at once on a shared machine.

A Validate starts a second kernel and runs the whole notebook in it (rlhf_course/classroom/patient_validate.py).
Forty at once share two cores and the machine's memory (each kernel ~260 MiB with torch), and every one of them
finishes late (bench/RESULTS.md); in turn, K at a time, the early ones are done early and the memory holds.  On the
hub (`make hub`) a broker of root's, of the training queue's kind (rlhf_course/classroom/training_broker.py),
hands out the K turns on the socket every server is given (``RLHF_VALIDATE_QUEUE``).  The student's server
connects before Validate starts its kernel (so the broker knows the student by the connection), says the
student's place while it waits, and gives the turn back when the notebook has run, or failed to.

Waiting never fails a Validate, and no clock turns it into failure:
* there is no longest wait: each turn is given back within the broker's hold (:data:`MAX_HOLD`), so the queue
  moves;
* with no broker configured or reachable, or when the broker closes before granting, Validate runs at once,
  without a turn;
* when the broker refuses (the student's one ticket is another request of hers, or she asks faster than the broker
  takes), Validate says so and asks again every :data:`RETRY_SECONDS` until it has a ticket, then waits its turn:
  her own other request is no way around the queue.  It waits no longer than that request lives, which the broker
  ends within a hold once granted;
* a turn the broker ends (held past :data:`MAX_HOLD`: ``ended``) lets the running Validate finish.
"""
from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator

from rlhf_course.lab.training_slots import RETRY_SECONDS, BrokerRequest

QUEUE_VARIABLE = "RLHF_VALIDATE_QUEUE"
SOCKET_FOLDER = "validate-queue"  # under the classroom's base folder
MAX_HOLD = 600.0  # seconds: a patient Validate on a saturated machine (338 s at most: bench/RESULTS.md), with room
WAITING_TURN = ("Validate is waiting its turn: {ahead} ahead of you in the class's queue (the machine validates "
                "{slots} at a time); nothing is wrong with your notebook.")

REFUSED = ("Another Validate of yours holds your place in the class's queue: this one waits for it to end, then takes "
           "its turn; nothing is wrong with your notebook.")

Say = Callable[[str, dict], None]  # an English sentence of i18n.ZH's and its fields (ValidateStatus.say)


@dataclass
class ValidateQueue:
    """The broker listening on ``broker`` (a Unix socket)."""
    broker: Path
    retry_seconds: float = RETRY_SECONDS

    @classmethod
    def from_environment(cls, environ=None) -> "ValidateQueue | None":
        """The queue the hub configured (``RLHF_VALIDATE_QUEUE``), or None (a laptop, a test: no queue)."""
        environ = os.environ if environ is None else environ
        broker = environ.get(QUEUE_VARIABLE, "")
        return cls(Path(broker)) if broker else None

    @contextlib.contextmanager
    def turn(self, say: Say) -> Iterator[bool]:
        """Hold a turn for the ``with`` block (True), waiting for it and telling ``say`` the place at every change;
        False when Validate runs without one (no broker to reach, or the broker closed)."""
        request = BrokerRequest(self.broker, self.retry_seconds)
        try:
            held = self._wait(request, say)
            if not held:  # its ticket given back before it runs: no turn granted to nobody while it runs
                request.close()
            yield held
        finally:
            request.close()

    @staticmethod
    def _wait(request: BrokerRequest, say: Say) -> bool:
        """Whether the broker granted a turn; until then, each refusal's first and each new place said."""
        refused = False
        for words in request.lines(deadline=None):
            if words[:1] == ["granted"]:
                return True
            if words[:1] == ["refused"] and not refused:
                refused = True
                say(REFUSED, {})
            if words[:1] == ["queued"] and len(words) == 3 and all(word.isdigit() for word in words[1:]):
                say(WAITING_TURN, {"ahead": int(words[1]), "slots": int(words[2])})
        return False  # the broker closed (the hub stopped, or ended the ticket), or is not there


@contextlib.contextmanager
def validate_turn(queue: "ValidateQueue | None", say: Say) -> Iterator[bool]:
    """The Validate handler runs the notebook inside this: ``queue``'s turn; without a queue, at once (False)."""
    if queue is None:
        yield False
        return
    with queue.turn(say) as held:
        yield held
