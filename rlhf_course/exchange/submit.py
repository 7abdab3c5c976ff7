"""nbgrader submit into inbound: each submission its student's and the instructors' group's alone."""
from __future__ import annotations

import os
import shutil
import tempfile

from nbgrader.exchange.default import ExchangeSubmit

from rlhf_course.exchange.base import SUBMISSION_DIR_MODE, SUBMISSION_FILE_MODE, TraversableRoot


class StrictExchangeSubmit(TraversableRoot, ExchangeSubmit):
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
