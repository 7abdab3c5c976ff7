"""nbgrader exchange classes and a late-submission policy, plugged in through nbgrader's config.

Stock nbgrader 0.9 makes the exchange root world-writable (0777) and every submission folder 0777,
relying on unguessable names; on a shared server one student can then read or overwrite another's
submission once the name leaks.  Here:

* the exchange root stays 0755 (students never write to it);
* inbound is nbgrader's 2733 plus the sticky bit (3733): students can create entries but not list
  them, nor rename or delete anyone else's; new entries take the inbound folder's group (the
  instructors');
* each submission is 0770 for folders and 0640 for files: its student and the instructors' group,
  nobody else.
"""
from __future__ import annotations

import math
import os
import shutil
import tempfile

from nbgrader.exchange.default import (ExchangeCollect, ExchangeFetchAssignment, ExchangeFetchFeedback,
                                       ExchangeList, ExchangeReleaseAssignment, ExchangeReleaseFeedback,
                                       ExchangeSubmit)
from nbgrader.plugins import LateSubmissionPlugin
from nbgrader.utils import check_directory
from traitlets import Float

ROOT_MODE = 0o755
SUBMISSION_DIR_MODE, SUBMISSION_FILE_MODE = 0o770, 0o640


class _TraversableRoot:
    """Stock nbgrader refuses to run unless the exchange root is writable by the caller: every
    student would have to be able to write there.  Reading and traversing it is all they need."""

    def ensure_root(self):
        if not check_directory(self.root, read=True, execute=True):
            self.fail(f"Unreadable exchange directory, please contact your instructor: {self.root}")


class StrictExchangeFetchAssignment(_TraversableRoot, ExchangeFetchAssignment):
    pass


class StrictExchangeFetchFeedback(_TraversableRoot, ExchangeFetchFeedback):
    pass


class StrictExchangeList(_TraversableRoot, ExchangeList):
    pass


class StrictExchangeCollect(_TraversableRoot, ExchangeCollect):
    pass


class StrictExchangeReleaseFeedback(_TraversableRoot, ExchangeReleaseFeedback):
    pass


class StrictExchangeReleaseAssignment(ExchangeReleaseAssignment):
    def init_dest(self):
        super().init_dest()
        # Students may create entries in inbound (and not list it); the sticky bit stops them
        # renaming or deleting each other's entries, which a writable folder otherwise allows.
        mode = os.stat(self.inbound_path).st_mode
        if not mode & 0o1000:
            os.chmod(self.inbound_path, (mode & 0o7777) | 0o1000)

    def ensure_root(self):
        if not os.path.exists(self.root):
            self.log.warning("Creating exchange directory: %s", self.root)
            try:
                os.makedirs(self.root)
                os.chmod(self.root, ROOT_MODE)
            except PermissionError:
                self.fail(f"Could not create {self.root}, permission denied.")
        elif os.stat(self.root).st_mode & 0o002:  # tighten a world-writable root left by stock nbgrader
            try:
                os.chmod(self.root, ROOT_MODE)
            except PermissionError:
                self.fail(f"The exchange {self.root} is world-writable and cannot be changed.")


class StrictExchangeSubmit(_TraversableRoot, ExchangeSubmit):
    def do_copy(self, src, dest, log=None):
        """nbgrader's copy (ignore patterns, size limits) into a staging folder, then contents
        only into a submission folder created here.  Copying the folder itself would carry the
        student's folder mode over and drop the set-group-ID bit it inherits from inbound, and the
        files written next (timestamp, secret) would then not be readable by the instructors."""
        with tempfile.TemporaryDirectory() as staging:
            staged = os.path.join(staging, "submission")
            super().do_copy(src, staged, log)
            os.mkdir(dest)
            for folder, subfolders, files in os.walk(staged):
                target = os.path.join(dest, os.path.relpath(folder, staged))
                for name in subfolders:
                    os.mkdir(os.path.join(target, name))
                for name in files:
                    shutil.copyfile(os.path.join(folder, name), os.path.join(target, name))

    def copy_files(self):
        super().copy_files()
        dest = os.path.join(self.inbound_path, self.assignment_filename)
        self.set_perms(dest, fileperms=SUBMISSION_FILE_MODE, dirperms=SUBMISSION_DIR_MODE)


class PenaltyPerHour(LateSubmissionPlugin):
    """Points off for every started hour late; no credit after a cutoff."""

    points_per_hour = Float(2.0, help="Points deducted per started hour after the due date").tag(config=True)
    zero_after_hours = Float(72.0, help="No credit when later than this many hours").tag(config=True)

    def late_submission_penalty(self, student_id: str, score: float, total_seconds_late: float) -> float:
        if total_seconds_late <= 0:
            return 0.0
        hours = total_seconds_late / 3600
        if hours > self.zero_after_hours:
            return float(score)
        return float(min(score, math.ceil(hours) * self.points_per_hour))


def configure(c, exchange_root: str, course_id: str) -> None:
    """The exchange settings a course needs, for nbgrader_config.py (instructor) and for the
    system-wide /etc/jupyter/nbgrader_config.py of a JupyterHub (students)."""
    c.Exchange.root = exchange_root
    c.CourseDirectory.course_id = course_id
    for action in ("release_assignment", "fetch_assignment", "submit", "list", "collect", "release_feedback",
                   "fetch_feedback"):
        name = "StrictExchange" + "".join(part.title() for part in action.split("_"))
        setattr(c.ExchangeFactory, action, f"rlhf_course.exchange.{name}")
