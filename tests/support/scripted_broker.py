"""A training broker played from a script: the lab's side of the training queue tested without the classroom's
broker (rlhf_course/lab/training_slots.py; the broker's own tests: tests/classroom/test_training_broker.py)."""
import socket
import tempfile
import threading
import time
from pathlib import Path


class ScriptedBroker:
    """A Unix socket that answers every connection with ``script``: (seconds to wait, line to write) pairs; it then
    keeps the connection open until the client closes it, and records when that happened."""

    def __init__(self, script: list[tuple[float, str]]):
        self.folder = tempfile.TemporaryDirectory(prefix="broker-")
        self.path = Path(self.folder.name) / "broker.sock"
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.listener.bind(str(self.path))
        self.listener.listen()
        self.script, self.closed_at = script, None
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self):
        connection, _ = self.listener.accept()
        with connection:
            for seconds, line in self.script:
                time.sleep(seconds)
                connection.sendall(f"{line}\n".encode())
            connection.recv(1)  # the client closed: its slot is free
            self.closed_at = time.monotonic()

    def close(self):
        self.listener.close()
        self.folder.cleanup()
