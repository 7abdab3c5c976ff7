"""nbgrader submit into inbound: each submission its student's and the instructors' group's alone; the student
is told when it was due and, when it is late, by how much (never refused: the late penalty is grading's), and warned
when it replaces their submission of the assignment's other language edition (only the latest of either is graded)."""
from __future__ import annotations

import os
import shutil
import tempfile

from nbgrader.exchange.default import ExchangeSubmit
from nbgrader.utils import find_all_notebooks, get_username, parse_utc

from rlhf_course import i18n
from rlhf_course.course import notebooks
from rlhf_course.exchange import deadlines
from rlhf_course.exchange.base import PrintableNames, SUBMISSION_DIR_MODE, SUBMISSION_FILE_MODE, TraversableRoot


class StrictExchangeSubmit(PrintableNames, TraversableRoot, ExchangeSubmit):
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
        self.refuse_unreadable()
        self.warn_of_replaced_edition()
        super().copy_files()
        dest = os.path.join(self.inbound_path, self.assignment_filename)
        self.set_perms(dest, fileperms=SUBMISSION_FILE_MODE, dirperms=SUBMISSION_DIR_MODE)
        self.tell_deadline()

    def refuse_unreadable(self) -> None:
        """Refused before anything is copied, in the edition's language: a released notebook Jupyter cannot read
        would replace the student's earlier submission (only the latest is graded) with one grading scores 0.  Only
        the released notebooks are read (a broken checkpoint or scratch notebook is not graded, so never refused)."""
        self.init_release()
        for name in find_all_notebooks(self.release_path):
            if not os.path.isfile(os.path.join(self.src_path, name)):
                continue  # nbgrader's own check says what is missing
            try:
                with open(os.path.join(self.src_path, name), encoding="utf-8") as handle:
                    notebooks.parse(handle.read())
            except (OSError, UnicodeDecodeError, notebooks.NotANotebook) as exc:
                why = str(exc) if isinstance(exc, notebooks.NotANotebook) else f"{type(exc).__name__}: {exc}"
                deadline = deadlines.read(self.root, self.coursedir.course_id, self.coursedir.assignment_id,
                                          get_username())
                language = deadline.language if deadline is not None else i18n.ENGLISH
                self.fail(i18n.t(UNREADABLE, language, notebook=name, why=why[:300]))

    def warn_of_replaced_edition(self) -> str | None:
        """"This replaces your rlhf submission of ... (and any manual grade on it) ..." when the student's latest
        submission of another edition of this assignment (rlhf for rlhf_zh) is newer than their latest of this one
        (:func:`replaced_edition`), in this edition's language, before this one is copied."""
        student = self.assignment_filename.split("+", 1)[0]
        replaced = replaced_edition(self.root, self.coursedir.course_id, self.coursedir.assignment_id,
                                    self.cache_path, student)
        if replaced is None:
            return None
        sentence = replaced["text"][replaced["language"]]
        self.log.warning(sentence)
        return sentence

    def tell_deadline(self) -> str | None:
        """"Submitted rlhf at ...: late by 2 h 10 min: the late penalty applies (due ..., your extension ...)."
        in the edition's language (the Chinese edition's in Chinese), on the command line (a late one as a
        warning); the Assignment List shows the same verdict beside the submission (StrictExchangeList)."""
        deadline = deadlines.read(self.root, self.coursedir.course_id, self.coursedir.assignment_id, get_username())
        if deadline is None or deadline.due is None:
            return None
        when = parse_utc(self.timestamp)
        sentence = i18n.t("Submitted {assignment} at {when}: {verdict} ({deadline}).", deadline.language,
                          assignment=self.coursedir.assignment_id, when=deadlines.shown(when),
                          verdict=deadline.verdict(when), deadline=deadline.sentence())
        (self.log.warning if deadline.seconds_late(when) > 0 else self.log.info)(sentence)
        return sentence


UNREADABLE = ("{notebook} was not submitted: Jupyter cannot read it ({why}). Your earlier submission, if any, is "
              "still the one graded. Restore the notebook's last good state (in JupyterLab: File > Revert Notebook to "
              "Checkpoint, or ask for a fresh copy), save it, and submit again.")
REPLACES = ("This replaces your {other} submission of {when} (and any manual grade on it): only the latest "
            "submission of either edition is graded.")


def replaced_edition(root: str, course_id: str, assignment: str, cache_path: str, student: str) -> dict | None:
    """What submitting ``assignment`` now would replace: the student's latest submission of another edition of it
    (rlhf for rlhf_zh) when that is newer than their latest of ``assignment``, read from the student's own record of
    their submissions (nbgrader's submit cache ``cache_path``, the course's folder in it; inbound is not theirs to
    list).  ``{"edition": "rlhf", "timestamp": the replaced one's (UTC), "language": ``assignment``'s edition's,
    "text": {language: the sentence}}`` in English and Chinese (the lab shows the student's), or None."""
    others = deadlines.other_editions(root, course_id, assignment)
    if not others:
        return None
    latest = _latest_submissions(cache_path, student)
    candidates = [(latest[other], other) for other in others if other in latest]
    if not candidates:
        return None
    when, other = max(candidates)
    if assignment in latest and latest[assignment] >= when:
        return None  # already replaced by an earlier submission of this edition
    deadline = deadlines.read(root, course_id, assignment, student)
    return {"edition": other, "timestamp": deadlines.shown(when),
            "language": deadline.language if deadline else i18n.ENGLISH,
            "text": {language: i18n.t(REPLACES, language, other=other, when=deadlines.shown(when))
                     for language in deadlines.LANGUAGES}}


def _latest_submissions(cache_path: str, student: str) -> dict:
    """{assignment: the time of ``student``'s latest submission of it} from nbgrader's submit cache (folders
    ``<student>+<assignment>+<timestamp>``); names that do not parse are skipped."""
    latest = {}
    try:
        names = os.listdir(cache_path)
    except OSError:
        return latest
    for name in names:
        parts = name.split("+")
        if len(parts) < 3 or parts[0] != student:
            continue
        try:
            when = parse_utc(parts[2])
        except (ValueError, OverflowError):
            continue
        if parts[1] not in latest or when > latest[parts[1]]:
            latest[parts[1]] = when
    return latest
