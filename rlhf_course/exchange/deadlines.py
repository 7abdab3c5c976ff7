"""The deadline the exchange holds, so that a student sees it before and when they submit (nbgrader keeps due
dates and extensions in the gradebook, which students cannot read; nbgrader's PR #1909 also keeps them in the
exchange).  The gradebook stays the only authority: grading never reads these files, it reads the gradebook.

    <root>/<course>/deadlines/                    0755: anyone may read the due dates
    <root>/<course>/deadlines/<assignment>.json   0644: {"assignment", "due": "2026-12-18 23:59:00 UTC" or null,
                                                          "language": the edition's ("en", "zh-CN"),
                                                          "edition_of": the assignment it is an edition of
                                                          (rlhf for rlhf_zh; itself for rlhf)}
    <root>/<course>/deadlines/extensions/         0711: traversed, never listed (who has an extension is private)
    <root>/<course>/deadlines/extensions/<student>.json
                                                  0600 plus a POSIX ACL entry "user:<student>:r": the instructor
                                                  who wrote it and that one student; {"student", "extensions":
                                                  {assignment: seconds}}, padded with spaces

Any account may still ``stat`` a file it cannot read.  So every student of the roster (the gradebook's) has
a file, with or without an extension, all written together on each publish: the same size (padded to the
same multiple of 1 KiB), the same mode and ACL shape, the same access and modification times; their change
times are the publish's, a few milliseconds apart in the roster's order.  Existence, size and times say
nothing about who has an extension, for how long, or since when.

Why an ACL: on a hub every student is a Unix user of their own, the instructor is another, and no one runs as
root when an extension is granted.  A file only its owner may read is the instructor's alone; a group would have
to be one per student (only root makes groups); an unguessable name would be guessable by whoever knows the
rule.  The owner of a file may give one more user read access to it (POSIX ACLs, on ext4, XFS, tmpfs...), which
is exactly "the instructor and this student".  Where the exchange's filesystem has no ACLs, or a student has no
Unix account of that name, that student's extension is not published (said in the log) and they see only the
due date; the extension still holds in grading.

Everything here is written by the release (:mod:`release`) and by ``python -m rlhf_course.grading extend`` or
``... publish-deadlines``; students read it in ``nbgrader list``, on submit and in the Assignment List.
"""
from __future__ import annotations

import datetime as dt
import errno
import json
import math
import os
import pwd
import re
import struct
import tempfile
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from rlhf_course import i18n
from rlhf_course.course.errors import CourseError

if TYPE_CHECKING:  # (the students' side imports this module: the course's settings stay out of it)
    from rlhf_course.course.settings import Course

FOLDER, EXTENSIONS = "deadlines", "extensions"
FOLDER_MODE, EXTENSIONS_MODE, DUE_MODE, EXTENSION_MODE = 0o755, 0o711, 0o644, 0o600
EXTENSION_BLOCK = 1024  # every student's extension file is padded to the same multiple of this, bytes
_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.@-]{0,63}")  # an assignment or student id that can name a file
UTC_FORMAT = "%Y-%m-%d %H:%M:%S UTC"
LANGUAGES = (i18n.ENGLISH, i18n.CHINESE)  # every sentence a student reads here, in both (the lab picks one)



class PublishError(CourseError, RuntimeError):
    """A deadline that cannot be put in the exchange as asked; nothing of it was written."""


@dataclass(frozen=True)
class Deadline:
    """One assignment's deadline as one student sees it: times naive UTC, as the gradebook keeps them."""
    assignment: str
    due: dt.datetime | None
    language: str = i18n.ENGLISH
    extension: dt.timedelta = dt.timedelta(0)

    @property
    def until(self) -> dt.datetime | None:
        return self.due + self.extension if self.due else None

    def seconds_late(self, when: dt.datetime) -> float:
        """How late a submission at ``when`` (naive UTC) is, after the extension; 0 or less: on time."""
        return (when - self.until).total_seconds() if self.due else 0.0

    def sentence(self, language: str | None = None) -> str:
        """"due 2026-12-18 23:59 UTC" or "due ..., your extension +48 h (until ...)", in ``language``."""
        language = language or self.language
        if self.due is None:
            return i18n.t("no due date", language)
        if self.extension:
            return i18n.t("due {due}, your extension +{hours} h (until {until})", language, due=shown(self.due),
                          hours=f"{self.extension.total_seconds() / 3600:g}", until=shown(self.until))
        return i18n.t("due {due}", language, due=shown(self.due))

    def verdict(self, when: dt.datetime, language: str | None = None) -> str:
        """"on time" or "late by 2 h 10 min: the late penalty applies" for a submission at ``when``."""
        language = language or self.language
        late = self.seconds_late(when)
        if late <= 0:
            return i18n.t("on time", language)
        return i18n.t("late by {late}: the late penalty applies", language, late=how_late(late, language))

    def as_json(self, language: str | None = None) -> dict:
        """What the Assignment List shows (rlhf_course's lab extension): the dates and the sentence in English
        and Chinese (the lab picks the student's), plus ``language`` of the edition."""
        return {"due": self.due.strftime(UTC_FORMAT) if self.due else None,
                "extension_hours": self.extension.total_seconds() / 3600,
                "until": self.until.strftime(UTC_FORMAT) if self.due else None,
                "language": self.language,
                "text": {lang: self.sentence(lang) for lang in LANGUAGES}}


def shown(moment: dt.datetime) -> str:
    return f"{moment:%Y-%m-%d %H:%M} UTC"


def how_late(seconds: float, language: str) -> str:
    """"2 h 10 min" ("2 小时 10 分钟") for 2 h 10 min 0-59 s; a late submission is never "0 min"."""
    hours, minutes = divmod(max(math.floor(seconds / 60), 1), 60)
    if hours:
        return i18n.t("{hours} h {minutes} min", language, hours=hours, minutes=minutes)
    return i18n.t("{minutes} min", language, minutes=minutes)


# -- where the files are ---------------------------------------------------------------------------------
def folder(root: str, course_id: str) -> str:
    return os.path.join(root, course_id, FOLDER)


def due_path(root: str, course_id: str, assignment: str) -> str:
    return os.path.join(folder(root, course_id), f"{_checked(assignment, 'assignment')}.json")


def extension_path(root: str, course_id: str, student: str) -> str:
    return os.path.join(folder(root, course_id), EXTENSIONS, f"{_checked(student, 'student')}.json")


def _checked(name: str, what: str) -> str:
    if not _NAME.fullmatch(name or ""):
        raise PublishError(f"{what} id {ascii(name)} cannot name a file in the exchange (letters, digits, _.@-)")
    return name


# -- the instructor's side: writing -----------------------------------------------------------------------
def publish_due_date(root: str, course_id: str, assignment: str, due: dt.datetime | None, language: str,
                     edition_of: str | None = None) -> str:
    """Write ``assignment``'s due date (naive UTC, None: none), readable by everyone, with the assignment it is a
    language edition of (``edition_of``; None: itself); the path written."""
    path = due_path(root, course_id, assignment)
    _folders(root, course_id)
    _write(path, {"assignment": assignment, "due": due.strftime(UTC_FORMAT) if due else None, "language": language,
                  "edition_of": edition_of or assignment}, DUE_MODE)
    return path


def publish_extensions(root: str, course_id: str, granted: dict[str, dict[str, dt.timedelta]], log=None) -> list[str]:
    """Write the extensions of every student of the roster (``granted``: {student: {assignment: extension}},
    an empty mapping for a student without one), each file readable by its writer and that student only, all
    of one size and one set of times (see the module's text); remove the file of anyone not written now.
    Returns the students not published (an id that cannot name a file, no Unix account of that name, no ACLs
    on this filesystem), each said in ``log``."""
    _folders(root, course_id)
    extensions = os.path.join(folder(root, course_id), EXTENSIONS)
    skipped, files = [], {}  # files: student -> (its file's JSON, the uid that may read it)
    for student, per_assignment in sorted(granted.items()):
        if not _NAME.fullmatch(student):  # no Unix account has such a name either
            skipped.append(student)
            if log:
                log.warning("%s's extension is not published to the exchange: the id cannot name a file",
                            ascii(student))
            continue
        try:
            uid = pwd.getpwnam(student).pw_uid
        except KeyError:  # (said only of a student who has an extension: one without loses nothing)
            if not any(per_assignment.values()):
                continue
            skipped.append(student)
            if log:
                log.warning("%s's extension is not published to the exchange: no Unix account of that name "
                            "(it still holds in grading)", ascii(student))
            continue
        seconds = {a: e.total_seconds() for a, e in sorted(per_assignment.items()) if e}
        files[student] = (json.dumps({"student": student, "extensions": seconds}, ensure_ascii=False, indent=1), uid)
    longest = max((len(text.encode()) for text, _ in files.values()), default=0)
    size = math.ceil(longest / EXTENSION_BLOCK) * EXTENSION_BLOCK
    moment = time.time_ns()
    written = set()
    for student, (text, uid) in files.items():
        try:
            _write(extension_path(root, course_id, student), text, EXTENSION_MODE, reader_uid=uid, size=size,
                   times_ns=moment)
            written.add(f"{student}.json")
        except PublishError as exc:
            skipped.append(student)
            if log:
                log.warning("%s's extension is not published to the exchange: %s", ascii(student), exc)
    for name in os.listdir(extensions):  # students no longer on the roster, or not published now
        if name.endswith(".json") and not name.startswith(".") and name not in written:
            _remove(os.path.join(extensions, name))
    return skipped


def _folders(root: str, course_id: str) -> None:
    course = os.path.join(root, course_id)
    if not os.path.isdir(course):
        raise PublishError(f"no course {course_id!r} in the exchange {root} (release an assignment first)")
    top, extensions = folder(root, course_id), os.path.join(folder(root, course_id), EXTENSIONS)
    for path, mode in ((top, FOLDER_MODE), (extensions, EXTENSIONS_MODE)):
        os.makedirs(path, exist_ok=True)
        if os.stat(path).st_mode & 0o7777 != mode:
            os.chmod(path, mode)


def _write(path: str, content: dict | str, mode: int, reader_uid: int | None = None, size: int = 0,
           times_ns: int | None = None) -> None:
    """Write ``content`` (JSON: a value, or its text) beside ``path`` with its mode (and ACL) set, padded with
    spaces to ``size`` bytes and with access and modification times ``times_ns`` if given, then move it into
    place: a reader sees the old file or the new one, never a file without its permissions."""
    text = content if isinstance(content, str) else json.dumps(content, ensure_ascii=False, indent=1)
    data = text.encode()
    data += b" " * max(0, size - len(data))
    fd, temporary = tempfile.mkstemp(prefix=".", suffix=".json", dir=os.path.dirname(path))
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        os.chmod(temporary, mode)
        if reader_uid is not None and reader_uid != os.stat(temporary).st_uid:
            readable_by(temporary, reader_uid)
        if times_ns is not None:
            os.utime(temporary, ns=(times_ns, times_ns))
        os.replace(temporary, path)
    except BaseException:
        _remove(temporary)
        raise


def _remove(path: str) -> None:
    try:
        os.remove(path)
    except FileNotFoundError:
        pass


# POSIX ACLs as Linux stores them (the system.posix_acl_access attribute; acl(5), linux/posix_acl_xattr.h): a
# version, then (tag, permissions, id) entries sorted by tag.  Written directly: the `acl` package's setfacl is
# not installed everywhere, and the whole format is these few bytes.
_ACL_VERSION, _UNDEFINED = 2, 0xFFFFFFFF
_USER_OBJ, _USER, _GROUP_OBJ, _MASK, _OTHER = 0x01, 0x02, 0x04, 0x10, 0x20
_READ, _WRITE = 4, 2


def readable_by(path: str, uid: int) -> None:
    """Give the user ``uid`` read access to ``path`` (mode 0600: its owner reads and writes, nobody else):
    owner rw, that user r, group none, others none."""
    entries = [(_USER_OBJ, _READ | _WRITE, _UNDEFINED), (_USER, _READ, uid), (_GROUP_OBJ, 0, _UNDEFINED),
               (_MASK, _READ, _UNDEFINED), (_OTHER, 0, _UNDEFINED)]
    value = struct.pack("<I", _ACL_VERSION) + b"".join(struct.pack("<HHI", *entry) for entry in entries)
    try:
        os.setxattr(path, "system.posix_acl_access", value)
    except OSError as exc:
        if exc.errno in (errno.ENOTSUP, errno.EOPNOTSUPP):
            raise PublishError(f"the exchange's filesystem has no POSIX ACLs ({path})") from None
        raise PublishError(f"cannot give uid {uid} read access to {path}: {exc.strerror}") from None


# -- the student's side: reading --------------------------------------------------------------------------
def read(root: str, course_id: str, assignment: str, student: str) -> Deadline | None:
    """``assignment``'s deadline for ``student`` (their own extension only: the only file of the extensions
    they can open); None when the exchange holds no due date for it.  A file that cannot be read or parsed
    counts as absent: the student's command goes on without it."""
    try:
        with open(due_path(root, course_id, assignment)) as handle:
            content = json.load(handle)
        due = _parsed(content.get("due"))
        language = content.get("language") if content.get("language") in i18n.TABLES else i18n.ENGLISH
    except (OSError, ValueError, PublishError, AttributeError):
        return None
    return Deadline(assignment, due, language, own_extension(root, course_id, assignment, student))


def other_editions(root: str, course_id: str, assignment: str) -> list[str]:
    """The other language editions of ``assignment`` the exchange holds deadlines for (rlhf_zh for rlhf, rlhf for
    rlhf_zh): a student's latest submission of any of them is the one graded.  Unreadable files count as absent."""
    editions = {}
    try:
        names = sorted(os.listdir(folder(root, course_id)))
    except OSError:
        return []
    for name in names:
        if not name.endswith(".json"):
            continue
        try:
            with open(os.path.join(folder(root, course_id), name)) as handle:
                content = json.load(handle)
            editions[str(content["assignment"])] = str(content.get("edition_of") or content["assignment"])
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            continue
    base = editions.get(assignment, assignment)
    return sorted(a for a, b in editions.items() if b == base and a != assignment)


def own_extension(root: str, course_id: str, assignment: str, student: str) -> dt.timedelta:
    try:
        with open(extension_path(root, course_id, student)) as handle:
            seconds = json.load(handle)["extensions"].get(assignment, 0)
        return dt.timedelta(seconds=float(seconds))
    except (OSError, ValueError, KeyError, TypeError, AttributeError, PublishError, OverflowError):
        return dt.timedelta(0)


def _parsed(text: str | None) -> dt.datetime | None:
    if text is None:
        return None
    return dt.datetime.strptime(text, UTC_FORMAT)


def publish(course: Course, exchange_root: str, course_id: str, assignments: list[str] | None = None,
            log=None) -> list[str]:
    """Put the course's gradebook's deadlines into the exchange, where students read them: the due date of each of
    ``assignments`` (default: each assignment released to the exchange) and every student's extensions.  Returns the lines said (what was published, what could not be)."""
    from pathlib import Path

    from nbgrader.api import Gradebook

    from rlhf_course import i18n
    from rlhf_course.course import editions, extension_record

    outbound = Path(exchange_root, course_id, "outbound")
    if assignments is None:
        assignments = sorted(p.name for p in outbound.iterdir()) if outbound.is_dir() else []
    found = editions.editions(course)
    language = {e.assignment: e.language for e in found}
    base = {e.assignment: e.base for e in found}
    said = []
    with Gradebook(course.db_url) as gb:
        dues = {a.name: a.duedate for a in gb.assignments}
        granted: dict[str, dict[str, dt.timedelta]] = {s.id: {} for s in gb.students}
        for assignment in gb.assignments:
            for submission in assignment.submissions:
                if submission.extension:
                    granted[submission.student.id][assignment.name] = submission.extension
    # granted before they submitted (recorded per base assignment): for whichever edition they will submit
    for student, given in extension_record.read(course).items():
        for assignment in dues if student in granted else ():
            extension = given.get(base.get(assignment, assignment))
            if extension:
                granted[student].setdefault(assignment, extension)
    for assignment in assignments:
        due = dues.get(assignment)
        publish_due_date(exchange_root, course_id, assignment, due, language.get(assignment, i18n.ENGLISH),
                         base.get(assignment))
        said.append(f"{assignment}: {f'due {due:%Y-%m-%d %H:%M} UTC' if due else 'no due date'} (in the exchange)")
    skipped = publish_extensions(exchange_root, course_id, granted, log)
    published = sorted(s for s, e in granted.items() if e and s not in skipped)
    said.append(f"extensions in the exchange, each readable by its student only: {', '.join(published) or 'none'}")
    if skipped:
        said.append(f"not published (see the warnings): {', '.join(skipped)}")
    return said
