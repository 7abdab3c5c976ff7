"""The classroom's queues: a service of root's that hands out K slots over a Unix socket, in turn.

On the hub (`make hub`) forty students share two cores, each under a one-core quota of their own.  When many
press the training cell together, every one trains at a fraction of a core and all finish late; in turn, each
trains at full speed and the early ones are done early.  The labs ask this broker for their turn
(rlhf_course/lab/training_slots.py); the hub runs it (as root) for as long as the classroom runs.  A second
broker of the same kind orders the class's Validates (rlhf_course/classroom/validate_queue.py): a Validate starts a
second kernel, and forty at once share out the cores and the memory until every one of them is late.

* A connection is a request: the broker learns the caller's uid and pid from the kernel (``SO_PEERCRED``), so
  nothing a student sends names anyone.  Each uid has at most one ticket, waiting or granted: a second
  connection of the same user while the first lives is answered ``refused`` and closed.  The clients ask again
  a little later (their own other request holds the user's place: they wait for it, never run around it).
* Each uid's tickets are taken at ``ask_rate`` a second at most (``ask_burst`` at once): a request beyond that is
  answered ``refused`` and closed too, before any of the work a ticket costs (a pidfd, the order, the boost).  One
  student connecting in a loop thus holds no more than one connection and costs the broker (root, in no cgroup)
  an accept and a line per connection; the order and her classmates' answers are computed only when a ticket
  changes.  The refusals themselves, whoever asks, are ``refusal_rate`` a second at most: beyond it the broker
  leaves the socket unread for a moment, so a loop's connections wait in the socket's backlog (her ``connect``
  blocks) rather than cost root a core; a classmate's waits there too, for a backlog's worth of refusals at most
  (bench/queue_flood.py: the broker's CPU and a classmate's answer time while one student floods).
* The order is the broker's own (first come, first served, by arrival): nothing on disk to plant or lock.
* A ticket lasts while its connection is open and the process that connected lives (a pidfd, so a child or a
  descriptor passed on keeps nothing); a granted slot is taken back after ``max_hold`` seconds (``ended``),
  whatever the holder does.  A user who holds on purpose thus delays the others by one turn at most, and
  asking again puts her at the back.
* The holders are what the CPU boost sees (``on_holders``: the pids holding a slot, after every change).

The lines the broker writes (ASCII, one per change): ``queued <ahead> <slots>`` (``ahead``: tickets waiting
before this one), ``granted <slots> <max_hold>``, ``refused`` and ``ended``.  The client writes nothing:
anything it sends ends its ticket, as closing does.
"""
from __future__ import annotations

import contextlib
import os
import select
import selectors
import socket
import struct
import threading
import time
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

DEFAULT_MAX_HOLD = 180.0  # seconds: several quick trainings' length (6-35 s, bench/RESULTS.md); a longer run goes on unboosted
DEFAULT_ASK_RATE = 2.0  # tickets a second one user may take, sustained: four times a refused client's asking again
DEFAULT_ASK_BURST = 10  # ... and at once (a class's clients ask once a training or a Validate)
DEFAULT_REFUSAL_RATE = 1000.0  # all users' together: a class asking again asks 20 a second (bench/RESULTS.md)
ACCEPTS_PER_WAKE = 64  # connections taken from the backlog before the order is settled and answered again
LISTEN_BACKLOG = 16  # connections waiting to be taken: a flood's that a classmate's waits behind, at most
SOCKET_NAME = "broker.sock"


def default_slots(cpus: int, cpu_limit: float | None) -> int:
    """K for a machine of ``cpus`` cores whose users may each use ``cpu_limit`` cores: as many trainings
    as the cores hold at each one's full quota, at least one."""
    if not cpu_limit or cpu_limit <= 0:
        return max(1, cpus)
    return max(1, int(cpus // cpu_limit))


def peer_credentials(connection: socket.socket) -> tuple[int, int, int]:
    """(pid, uid, gid) of the process that connected, as the kernel recorded them at ``connect``."""
    return struct.unpack("3i", connection.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i")))


@dataclass(eq=False)
class Ticket:
    uid: int
    pid: int
    connection: socket.socket
    pidfd: int  # readable once the process that connected has exited
    granted_at: float | None = None  # time.monotonic() of the grant; None while waiting
    told_ahead: int | None = None  # the last place written to it


@dataclass
class AskBudget:
    """How many more may be taken now: a user's tickets, or the broker's refusals (a token bucket: ``rate`` more
    a second, ``burst`` at most)."""
    rate: float
    burst: float
    tokens: float
    at: float  # time.monotonic() of ``tokens``

    def take(self, now: float) -> bool:
        """Whether one more may be taken at ``now`` (and, if so, it is)."""
        self.tokens = min(self.burst, self.tokens + (now - self.at) * self.rate)
        self.at = now
        if self.tokens < 1:
            return False
        self.tokens -= 1
        return True


class SlotBroker:
    """K = ``slots`` slots handed out on the Unix socket ``path`` (see the module's docstring); ``name`` names its
    thread (which queue it serves)."""

    def __init__(self, path: Path, slots: int, max_hold: float = DEFAULT_MAX_HOLD,
                 on_holders: Callable[[set[int]], None] | None = None, name: str = "training-broker",
                 ask_rate: float = DEFAULT_ASK_RATE, ask_burst: int = DEFAULT_ASK_BURST,
                 refusal_rate: float = DEFAULT_REFUSAL_RATE):
        if slots < 1 or not max_hold > 0:
            raise ValueError(f"a broker needs at least one slot and a positive hold, not {slots} and {max_hold}")
        if not ask_rate > 0 or ask_burst < 1 or not refusal_rate > 0:
            raise ValueError(f"a broker needs positive rates of asking and refusing and a burst of one at least, not "
                             f"{ask_rate}, {refusal_rate} and {ask_burst}")
        self.path, self.slots, self.max_hold, self.name = Path(path), slots, max_hold, name
        self.ask_rate, self.ask_burst = ask_rate, ask_burst
        self.budgets: dict[int, AskBudget] = {}  # uid -> the tickets it may still take now
        self.refusals = AskBudget(refusal_rate, LISTEN_BACKLOG, LISTEN_BACKLOG, time.monotonic())
        self._listening_again_at: float | None = None  # the socket set aside until then (too many refusals)
        self._changed = False  # a ticket came or went since the order was last settled
        self.on_holders = on_holders or (lambda pids: None)
        self.tickets: dict[int, Ticket] = {}  # uid -> its ticket, in arrival order
        self.holder_pids: set[int] = set()
        self._selector = selectors.DefaultSelector()
        self._wake_reader, self._wake_writer = socket.socketpair()
        self._stopping = False
        self._thread: threading.Thread | None = None

    # -- running --------------------------------------------------------------------------------
    def start(self) -> "SlotBroker":
        """Listen on ``path`` (every account may connect; its folder is root's) and serve in a thread."""
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()
        self._listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._listener.bind(str(self.path))
        self.path.chmod(0o666)
        self._listener.listen(LISTEN_BACKLOG)
        self._listener.setblocking(False)
        self._selector.register(self._listener, selectors.EVENT_READ, self._accept)
        self._selector.register(self._wake_reader, selectors.EVENT_READ, None)
        self._thread = threading.Thread(target=self._serve, name=self.name, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Every ticket ended, the holders reported as none, the socket removed."""
        self._stopping = True
        self._wake_writer.send(b"x")
        if self._thread is not None:
            self._thread.join(timeout=10)

    def _serve(self) -> None:
        try:
            while not self._stopping:
                timeout = self._next_deadline()
                for key, _ in self._selector.select(timeout):
                    if key.data is not None:
                        key.data(key.fileobj)
                if self._listening_again_at is not None and time.monotonic() >= self._listening_again_at:
                    self._listening_again_at = None
                    self._selector.register(self._listener, selectors.EVENT_READ, self._accept)
                if self._changed or timeout is not None and self._next_deadline() == 0:
                    self._settle()
        except Exception:  # the broker is gone: clients find no socket and train at once; the hub's log says why
            traceback.print_exc()
            raise
        finally:
            for ticket in list(self.tickets.values()):
                self._drop(ticket)
            self._report_holders()
            self._selector.close()
            self._listener.close()
            self._wake_reader.close()
            with contextlib.suppress(FileNotFoundError):
                self.path.unlink()

    def _next_deadline(self) -> float | None:
        """Seconds until the first grant's hold is over or the socket set aside is read again (None: neither)."""
        ends = [t.granted_at + self.max_hold for t in self.tickets.values() if t.granted_at is not None]
        if self._listening_again_at is not None:
            ends.append(self._listening_again_at)
        return max(0.0, min(ends) - time.monotonic()) if ends else None

    # -- requests -------------------------------------------------------------------------------
    def _accept(self, listener: socket.socket) -> None:
        """The connections waiting on the listener, in arrival order, :data:`ACCEPTS_PER_WAKE` at most (the order is
        then settled and answered); the listener set aside while the refusals are over their rate."""
        for _ in range(ACCEPTS_PER_WAKE):
            try:
                connection, _ = listener.accept()
            except OSError:  # none left, gone before we took it, or out of descriptors: the client finds no broker
                return
            if not self._request(connection) and not self.refusals.take(time.monotonic()):
                self._selector.unregister(listener)  # until a backlog's worth of refusals is due again
                self._listening_again_at = time.monotonic() + LISTEN_BACKLOG / self.refusals.rate
                return

    def _request(self, connection: socket.socket) -> bool:
        """Whether ``connection`` got a ticket (else it was refused, or its process is gone)."""
        connection.setblocking(False)
        pid, uid, _ = peer_credentials(connection)
        earlier = self.tickets.get(uid)
        if earlier is not None and self._gone(earlier):  # its release may be next in this same batch of events
            self._drop(earlier)
        if uid in self.tickets or not self._budget(uid).take(time.monotonic()):
            self._send_and_close(connection, "refused")
            return False
        try:
            pidfd = os.pidfd_open(pid)
        except OSError:  # the process has already exited
            connection.close()
            return False
        ticket = Ticket(uid, pid, connection, pidfd)
        self.tickets[uid] = ticket
        self._changed = True
        self._selector.register(connection, selectors.EVENT_READ, lambda _, t=ticket: self._drop(t))
        self._selector.register(pidfd, selectors.EVENT_READ, lambda _, t=ticket: self._drop(t))
        return True

    def _budget(self, uid: int) -> AskBudget:
        if uid not in self.budgets:
            self.budgets[uid] = AskBudget(self.ask_rate, self.ask_burst, self.ask_burst, time.monotonic())
        return self.budgets[uid]

    @staticmethod
    def _gone(ticket: Ticket) -> bool:
        """Whether the ticket's process exited or its connection was closed (or spoke: not a client's part)."""
        if select_readable(ticket.pidfd):
            return True
        try:
            ticket.connection.recv(1, socket.MSG_PEEK)  # end of file, or bytes
        except BlockingIOError:
            return False
        except OSError:
            pass
        return True

    def _drop(self, ticket: Ticket) -> None:
        if self.tickets.get(ticket.uid) is not ticket:
            return
        del self.tickets[ticket.uid]
        self._changed = True
        for resource in (ticket.connection, ticket.pidfd):
            with contextlib.suppress(KeyError, ValueError):
                self._selector.unregister(resource)
        ticket.connection.close()
        os.close(ticket.pidfd)

    def _send(self, ticket: Ticket, line: str) -> bool:
        """Write ``line`` without waiting; a client that does not read (its buffer full) or left loses its ticket."""
        try:
            ticket.connection.send(f"{line}\n".encode())
            return True
        except OSError:
            self._drop(ticket)
            return False

    @staticmethod
    def _send_and_close(connection: socket.socket, line: str) -> None:
        with contextlib.suppress(OSError):
            connection.send(f"{line}\n".encode())
        connection.close()

    # -- the order ------------------------------------------------------------------------------
    def _settle(self) -> None:
        """End the holds that are over, grant the free slots in arrival order, tell each waiter its place."""
        self._changed = False
        now = time.monotonic()
        for ticket in [t for t in self.tickets.values() if t.granted_at is not None]:
            if now - ticket.granted_at >= self.max_hold:
                self._send(ticket, "ended")
                self._drop(ticket)
        settled = False
        while not settled:  # a waiter that left while told its turn changes everyone's place behind it
            settled = True
            free = self.slots - sum(t.granted_at is not None for t in self.tickets.values())
            waiting = [t for t in self.tickets.values() if t.granted_at is None]
            for place, ticket in enumerate(waiting):
                if place < free:
                    ticket.granted_at = now
                    self._report_holders()  # the boost before the grant: the training starts with it
                    line = f"granted {self.slots} {self.max_hold:g}"
                elif ticket.told_ahead != place - free:
                    ticket.told_ahead = place - free
                    line = f"queued {place - free} {self.slots}"
                else:
                    continue
                if not self._send(ticket, line):
                    settled = False
                    break
        self._report_holders()

    def _report_holders(self) -> None:
        holders = {t.pid for t in self.tickets.values() if t.granted_at is not None}
        if holders != self.holder_pids:
            self.holder_pids = holders
            self.on_holders(set(holders))


def select_readable(descriptor: int) -> bool:
    """Whether ``descriptor`` is readable now (a pidfd: its process has exited)."""
    poller = select.poll()  # not select.select: a descriptor past FD_SETSIZE is one as well
    poller.register(descriptor, select.POLLIN)
    return bool(poller.poll(0))
