"""What every strict exchange class shares: the exchange's modes, and a root its users only read."""
from __future__ import annotations

import logging

from nbgrader.utils import check_directory

from rlhf_course.printable import printable

ROOT_MODE = 0o755  # the exchange root: its owner's (the instructor's); students never write to it
SUBMISSION_DIR_MODE, SUBMISSION_FILE_MODE = 0o770, 0o640  # a submission: its student and the instructors' group


class TraversableRoot:
    """Stock nbgrader refuses to run unless the exchange root is writable by the caller: every
    student would have to be able to write there.  Reading and traversing it is all they need."""

    def ensure_root(self):
        if not check_directory(self.root, read=True, execute=True):
            self.fail(f"Unreadable exchange directory, please contact your instructor: {self.root}")


class PrintableRecords(logging.Filter):
    """One rule for every line the course's nbgrader apps print (:func:`~rlhf_course.printable.printable`):
    control characters, terminal escapes included, become '?', in the message and in a traceback.  Names a
    student made (an inbound entry's id, assignment and time, a path holding them) reach nbgrader's own
    messages (``nbgrader list --inbound``, "No notebooks found in ..."); the filter sits on every app's console
    handler (:func:`rlhf_course.exchange.configure`) and on the log of every exchange class of the course."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        record.msg, record.args = printable(message), ()
        if record.exc_info and not record.exc_text:
            record.exc_text = printable(logging.Formatter().formatException(record.exc_info))
        if record.stack_info:
            record.stack_info = printable(record.stack_info)
        return True


PRINTABLE = PrintableRecords()


class PrintableNames:
    """An exchange class whose log (its app's) prints every line through :data:`PRINTABLE`, whatever handler
    the app has (the console's, a log file's, the Assignment List's)."""

    def start(self):
        printable_log(self.log)
        return super().start()


def printable_log(log: logging.Logger | logging.LoggerAdapter) -> None:
    """Put :data:`PRINTABLE` on ``log`` (once)."""
    logger = log.logger if isinstance(log, logging.LoggerAdapter) else log
    if PRINTABLE not in logger.filters:
        logger.addFilter(PRINTABLE)

