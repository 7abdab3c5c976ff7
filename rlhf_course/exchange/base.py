"""What every strict exchange class shares: the exchange's modes, and a root its users only read."""
from __future__ import annotations

from nbgrader.utils import check_directory

ROOT_MODE = 0o755  # the exchange root: its owner's (the instructor's); students never write to it
SUBMISSION_DIR_MODE, SUBMISSION_FILE_MODE = 0o770, 0o640  # a submission: its student and the instructors' group


class TraversableRoot:
    """Stock nbgrader refuses to run unless the exchange root is writable by the caller: every
    student would have to be able to write there.  Reading and traversing it is all they need."""

    def ensure_root(self):
        if not check_directory(self.root, read=True, execute=True):
            self.fail(f"Unreadable exchange directory, please contact your instructor: {self.root}")
