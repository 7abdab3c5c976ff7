"""nbgrader collect that believes only the kernel (:class:`StrictExchangeCollect`): an entry's owner, not its
name, says whose it is; it is copied without following links, within limits; its time is its latest ctime.
Each entry's fate goes to the log and ``collect_report.csv``."""
from __future__ import annotations

import contextlib
import csv
import datetime
import fnmatch
import os
import pwd
import re
import shutil
import stat
import tempfile
from dataclasses import dataclass

from nbgrader.api import Gradebook, MissingEntry
from nbgrader.exchange.default import ExchangeCollect
from nbgrader.utils import check_mode, parse_utc
from traitlets import Float, Integer, Unicode

from rlhf_course.course.errors import CourseError
from rlhf_course.exchange.base import PrintableNames, TraversableRoot
from rlhf_course import spreadsheet


class Refused(CourseError):
    """An inbound entry that is not collected, and why (shown in the log and the collect report)."""


class CollectFailed(Exception):
    """Writing the collected copy failed (the course's side, e.g. its disk is full): no entry is to blame."""


def shown(text: str) -> str:
    """A name a student chose, safe to print: control and non-ASCII characters escaped."""
    return ascii(text)[1:-1]


_STUDENT_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.@-]{0,63}")
_ENTRY_SUFFIX = re.compile(r"[A-Za-z0-9_=-]{1,64}")
_KINDS = {stat.S_IFIFO: "a FIFO", stat.S_IFCHR: "a character device", stat.S_IFBLK: "a block device",
          stat.S_IFSOCK: "a socket", stat.S_IFLNK: "a symbolic link"}
_READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_CHUNK = 1 << 20
REPORT_COLUMNS = ["assignment", "student", "entry", "status", "reason", "kernel_time", "claimed_time", "flag"]


@dataclass
class Entry:
    """One inbound entry of the assignment, as found, and what became of it."""
    name: str
    student: str = ""
    uid: int = -1
    claimed: datetime.datetime | None = None
    stamp_file: datetime.datetime | None = None
    kernel: datetime.datetime | None = None
    status: str = "refused"
    reason: str = ""
    flag: str = ""

    def row(self, assignment: str) -> list[str]:
        def when(moment):
            return moment.strftime("%Y-%m-%d %H:%M:%S.%f UTC") if moment else ""
        return [assignment, self.student, shown(self.name), self.status, self.reason, when(self.kernel),
                when(self.claimed), self.flag]


@dataclass
class _Walk:
    """What one walk through an entry has counted so far."""
    uid: int
    device: int
    max_items: int
    max_bytes: int
    ignore: list
    items: int = 0
    size: int = 0
    ctime_ns: int = 0


class StrictExchangeCollect(PrintableNames, TraversableRoot, ExchangeCollect):
    """Collects what the kernel vouches for, never what an entry claims.

    Stock collect takes the student from the entry's name (an entry another student made is only
    warned about), follows links as the instructor (a link to the instructor's source notebook or
    to /dev/zero is copied through), stops at a FIFO, and takes the submission time from the name.
    Here an entry counts only if its owner is the student it names; it is read through folder
    descriptors, never following a link, as regular files and folders owned by that student, within
    a size and a count limit; its time is the latest change time (ctime) of the entry and everything
    in it, which no user can set back.  Each entry's fate goes to the log and ``collect_report.csv``.
    Only each student's newest ``max_entries_examined`` entries (by the entry's change time) are
    examined; the older ones are counted, in one line of the log and one row of the report.
    nbgrader's ``check_owner`` is not honoured: the owner is always checked, and a mismatch refuses.
    """

    max_entry_bytes = Integer(
        None, allow_none=True,
        help="Most bytes one entry may hold (default: nbgrader's CourseDirectory.max_dir_size, as submit)",
    ).tag(config=True)
    max_entry_items = Integer(1000, help="Most files and folders one entry may hold").tag(config=True)
    max_entry_depth = Integer(16, help="Most levels of folders in one entry").tag(config=True)
    clock_tolerance = Float(
        5.0, help="Seconds the time a student's entry claims may differ from its kernel time before it is flagged",
    ).tag(config=True)
    report_name = Unicode("collect_report.csv", help="The collect report, in the course root").tag(config=True)
    max_entries_examined = Integer(
        50, help="Most inbound entries of one assignment that collect examines per student (per Unix owner): the "
                 "newest by the entry's change time, and with --before-duedate also the newest made by the due "
                 "date; the older ones are counted, reported once, and never opened",
    ).tag(config=True)

    def _entry_byte_limit(self) -> int:
        return self.max_entry_bytes if self.max_entry_bytes is not None else 1000 * self.coursedir.max_dir_size

    # -- finding the entries ------------------------------------------------------------------
    def init_src(self):
        if self.coursedir.course_id == "":
            self.fail("No course id specified. Re-run with --course flag.")
        self.course_path = os.path.join(self.root, self.coursedir.course_id)
        self.inbound_path = os.path.join(self.course_path, "inbound")
        if not os.path.isdir(self.inbound_path):
            self.fail(f"Course not found: {self.inbound_path}")
        if not check_mode(self.inbound_path, read=True, execute=True):
            self.fail(f"You don't have read permissions for the directory: {self.inbound_path}")
        with Gradebook(self.coursedir.db_url, self.coursedir.course_id) as gb:
            try:
                self.duedate = gb.find_assignment(self.coursedir.assignment_id).duedate
            except MissingEntry:
                self.duedate = None
        self.entries = []
        self.inbound_fd = os.open(self.inbound_path, _DIR_FLAGS)
        try:
            wanted = self.coursedir.student_id if self.coursedir.student_id not in ("", "*") else None
            names = [name for name in os.listdir(self.inbound_fd) if self._names_this_assignment(name, wanted)]
            examined, self.unexamined = self._newest_per_owner(names)
            for name in sorted(examined):
                entry = self._parse_name(name)
                if entry is None or (wanted is not None and entry.student != wanted):
                    continue
                self.entries.append(entry)
                if not entry.reason:
                    try:
                        self._check_entry(entry)
                    except Refused as refusal:
                        entry.reason = str(refusal)
        except BaseException:
            os.close(self.inbound_fd)
            raise

    def _names_this_assignment(self, name: str, wanted: str | None) -> bool:
        """Whether an entry's name is for this assignment (and for the student wanted, if one is): the name
        split, nothing looked up."""
        parts = name.split("+")
        return len(parts) >= 3 and parts[1] == self.coursedir.assignment_id and (wanted is None or parts[0] == wanted)

    def _newest_per_owner(self, names: list[str]) -> tuple[list[str], dict[str, int]]:
        """The entries to examine, and how many were left unexamined per owner's user name.

        A student can make entries by the thousand (each costs collect a walk through it), so only each
        owner's newest ``max_entries_examined`` are examined, by the entry's own change time (one ``lstat``,
        never its name): no user can set it back, and it moves with every name made in the entry, so an entry
        submitted after another is the newer; the student's latest submission is among their newest.  Grouped
        by owner, not by name: entries made in a classmate's name cost their maker's quota, never the
        classmate's.  With --before-duedate the newest made by the due date are examined too (an entry changed
        after it cannot be on time).  An entry that cannot be looked at is examined (its check refuses it at
        the cost of one ``stat``)."""
        by_owner: dict[int, list[tuple[int, str]]] = {}
        examined = []
        for name in names:
            try:
                info = os.stat(name, dir_fd=self.inbound_fd, follow_symlinks=False)
            except OSError:
                examined.append(name)
                continue
            by_owner.setdefault(info.st_uid, []).append((info.st_ctime_ns, name))
        limit = max(0, self.max_entries_examined)
        due_ns = None
        if self.before_duedate and self.duedate is not None:
            due_ns = (self.duedate - datetime.datetime(1970, 1, 1)) // datetime.timedelta(microseconds=1) * 1000 + 999
        unexamined = {}
        for uid, entries in by_owner.items():
            entries.sort(reverse=True)
            chosen = {name for _, name in entries[:limit]}
            if due_ns is not None:
                chosen.update([name for ctime, name in entries if ctime <= due_ns][:limit])
            examined += chosen
            if len(entries) > len(chosen):
                unexamined[_user_name(uid)] = len(entries) - len(chosen)
        return examined, unexamined

    def _parse_name(self, name: str) -> Entry | None:
        """nbgrader's ``<student>+<assignment>+<timestamp>[+<random>]``: None if the entry is for
        another assignment; otherwise an Entry, refused already if the name is not well formed."""
        parts = name.split("+")
        if len(parts) < 3 or parts[1] != self.coursedir.assignment_id:
            return None
        entry = Entry(name)
        if len(parts) > 4 or not _STUDENT_NAME.fullmatch(parts[0]) or (
                len(parts) == 4 and not _ENTRY_SUFFIX.fullmatch(parts[3])):
            entry.reason = "malformed entry name (not <student>+<assignment>+<timestamp>[+<random>])"
            return entry
        entry.student = parts[0]
        try:
            entry.uid = pwd.getpwnam(entry.student).pw_uid
        except KeyError:
            entry.reason = f"no Unix user named {entry.student}"
            return entry
        try:
            entry.claimed = parse_utc(parts[2])
        except (ValueError, OverflowError, TypeError, LookupError):
            entry.reason = "malformed timestamp in the entry name"
        return entry

    def _check_entry(self, entry: Entry) -> None:
        """Refuses an entry another user made or one that breaks a rule; sets its kernel time."""
        try:
            info = os.stat(entry.name, dir_fd=self.inbound_fd, follow_symlinks=False)
        except OSError as error:
            raise Refused(f"unreadable ({error.strerror})") from None
        if info.st_uid != entry.uid:
            raise Refused(f"made by {_user_name(info.st_uid)}, not by {entry.student} whom it names")
        if not stat.S_ISDIR(info.st_mode):
            raise Refused(f"the entry is {_KINDS.get(stat.S_IFMT(info.st_mode), 'not a folder')}")
        entry.kernel = _utc_from_ns(self._walk_entry(entry, None).ctime_ns)
        entry.stamp_file = self._claimed_in_file(entry)
        flags = []
        for what, moment in (("the entry name", entry.claimed), ("timestamp.txt", entry.stamp_file)):
            if moment is not None and abs((moment - entry.kernel).total_seconds()) > self.clock_tolerance:
                gap = (entry.kernel - moment).total_seconds()
                size = f"{abs(gap):.0f} s" if abs(gap) < 3600 else f"{abs(gap) / 3600:.1f} h"
                flags.append(f"{what} claims {size} {'before' if gap > 0 else 'after'} the kernel time")
        entry.flag = "; ".join(flags)

    def _claimed_in_file(self, entry: Entry) -> datetime.datetime | None:
        try:
            with _opened(entry.name, _DIR_FLAGS, self.inbound_fd) as folder, \
                    _opened("timestamp.txt", _READ_FLAGS, folder) as fd:
                if not stat.S_ISREG(os.fstat(fd).st_mode):
                    return None
                return parse_utc(os.read(fd, 200).decode("utf-8", "replace").strip())
        except (OSError, ValueError, OverflowError, TypeError, LookupError):
            return None

    # -- walking an entry -------------------------------------------------------------------
    def _walk_entry(self, entry: Entry, dest_fd: int | None) -> _Walk:
        """Checks (dest_fd None) or copies an entry into the folder dest_fd; raises Refused."""
        walk = _Walk(entry.uid, os.fstat(self.inbound_fd).st_dev, self.max_entry_items, self._entry_byte_limit(),
                     list(self.coursedir.ignore))
        try:
            with _opened(entry.name, _DIR_FLAGS, self.inbound_fd) as fd:
                info = os.fstat(fd)
                if info.st_uid != entry.uid:
                    raise Refused(f"made by {_user_name(info.st_uid)}, not by {entry.student} whom it names")
                if info.st_dev != walk.device:  # a FUSE mount, say, which could stall every read
                    raise Refused("the entry is on another file system than the exchange")
                walk.ctime_ns = info.st_ctime_ns
                self._walk_folder(fd, dest_fd, walk, "", 0)
        except OSError as error:
            raise Refused(f"unreadable ({error.strerror})") from None
        return walk

    def _walk_folder(self, fd: int, dest_fd: int | None, walk: _Walk, where: str, depth: int) -> None:
        for name in sorted(_listed(fd, walk)):
            if any(fnmatch.fnmatch(name, pattern) for pattern in walk.ignore):
                continue
            if depth == 0 and name == "timestamp.txt" and dest_fd is not None:
                continue  # the collected copy carries the kernel time instead
            path = shown(where + name)
            info = os.stat(name, dir_fd=fd, follow_symlinks=False)
            kind = stat.S_IFMT(info.st_mode)
            if kind not in (stat.S_IFDIR, stat.S_IFREG):
                raise Refused(f"{path} is {_KINDS.get(kind, 'not a regular file')}")
            if info.st_uid != walk.uid:
                raise Refused(f"{path} is owned by {_user_name(info.st_uid)}, not by the student")
            if info.st_dev != walk.device:
                raise Refused(f"{path} is on another file system than the exchange")
            if kind == stat.S_IFDIR:
                if depth + 1 >= self.max_entry_depth:
                    raise Refused(f"{path}: folders nested deeper than {self.max_entry_depth} levels")
                with _opened(name, _DIR_FLAGS, fd) as sub:
                    _same(info, os.fstat(sub), path)
                    walk.ctime_ns = max(walk.ctime_ns, os.fstat(sub).st_ctime_ns)
                    if dest_fd is None:
                        self._walk_folder(sub, None, walk, where + name + "/", depth + 1)
                    else:
                        with _writing(path):
                            os.mkdir(name, 0o770, dir_fd=dest_fd)
                            sub_dest = os.open(name, _DIR_FLAGS, dir_fd=dest_fd)
                        try:
                            self._walk_folder(sub, sub_dest, walk, where + name + "/", depth + 1)
                        finally:
                            os.close(sub_dest)
            elif dest_fd is None:
                walk.size += info.st_size
                walk.ctime_ns = max(walk.ctime_ns, info.st_ctime_ns)
                if walk.size > walk.max_bytes:
                    raise Refused(f"more than {walk.max_bytes} bytes")
            else:
                # O_NONBLOCK: a FIFO swapped in opens without waiting for a writer, and a student's
                # lease on their file makes the open fail instead of waiting for the lease to break.
                with _opened(name, _READ_FLAGS, fd) as src:
                    _same(info, os.fstat(src), path)
                    with _writing(path):
                        out = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                                      0o660, dir_fd=dest_fd)
                    try:
                        while chunk := os.read(src, _CHUNK):
                            walk.size += len(chunk)
                            if walk.size > walk.max_bytes:
                                raise Refused(f"more than {walk.max_bytes} bytes")
                            with _writing(path):
                                view = memoryview(chunk)
                                while view:
                                    view = view[os.write(out, view):]
                    finally:
                        os.close(out)
                    walk.ctime_ns = max(walk.ctime_ns, os.fstat(src).st_ctime_ns)

    # -- choosing and copying ---------------------------------------------------------------
    def init_dest(self):
        pass

    def copy_files(self):
        try:
            self._collect_all()
        except CollectFailed as failure:
            self._write_report()
            self.fail(str(failure))
        finally:
            os.close(self.inbound_fd)
        self._write_report()

    def _collect_all(self):
        by_student: dict[str, list[Entry]] = {}
        for entry in self.entries:
            if entry.reason:
                self.log.error("Refused inbound entry %s: %s", shown(entry.name), entry.reason)
            else:
                by_student.setdefault(entry.student, []).append(entry)
            if entry.flag:
                self.log.warning("Inbound entry %s: %s", shown(entry.name), entry.flag)
        for owner, count in sorted(self.unexamined.items()):
            self.log.warning("%s", self._unexamined_reason(owner, count))
        if not by_student:
            self.log.warning("No submissions of '%s' for course '%s' to collect", self.coursedir.assignment_id,
                             self.coursedir.course_id)
        for student in sorted({e.student for e in self.entries if e.student} - set(by_student)):
            self.log.error("Nothing collected for %s: every entry of theirs was refused", student)
        self.not_taken = []
        for student, entries in sorted(by_student.items()):
            entries.sort(key=lambda e: e.kernel, reverse=True)
            if self.before_duedate and self.duedate is not None:
                on_time = [e for e in entries if e.kernel <= self.duedate]
                entries = on_time + [e for e in entries if e not in on_time]
            for entry in entries:
                entry.status, entry.reason = "not latest", "a later entry (by kernel time) counts"
            for entry in entries:
                try:
                    self._collect(entry)
                    break
                except Refused as refusal:
                    entry.status, entry.reason = "refused", str(refusal)
                    self.log.error("Refused inbound entry %s: %s", shown(entry.name), entry.reason)
            else:
                self.log.error("Nothing collected for %s: every entry of theirs was refused", student)
        if len(self.not_taken) > 1:  # one line for the class: each student's warning may have scrolled away
            shown_names = ", ".join(self.not_taken[:30]) + (f" and {len(self.not_taken) - 30} more"
                                                            if len(self.not_taken) > 30 else "")
            self.log.warning("%d students submitted %s again after their copy was collected: %s; `make grade` "
                             "grades their older copies; `nbgrader collect --update %s` collects the newer ones "
                             "(collect_report.csv flags them)", len(self.not_taken), self.coursedir.assignment_id,
                             shown_names, self.coursedir.assignment_id)

    def _unexamined_rows(self) -> list[list[str]]:
        """One report row per owner whose older entries were not examined: under the owner's name, or, in a
        collect for one student (--student), under that student's (the entries are named for them), so that
        the next collect replaces it.  Flagged, so that the class report shows it."""
        wanted = self.coursedir.student_id if self.coursedir.student_id not in ("", "*") else None
        return [[self.coursedir.assignment_id, wanted or owner, f"{count} older entries", "not examined",
                 self._unexamined_reason(owner, count), "", "", f"{count:,} older entries not examined"]
                for owner, count in sorted(self.unexamined.items())]

    def _unexamined_reason(self, owner: str, count: int) -> str:
        return (f"{owner}: {count:,} older entries not examined (collect examines each student's newest "
                f"{self.max_entries_examined}: StrictExchangeCollect.max_entries_examined)")

    def _collect(self, entry: Entry) -> None:
        dest_path = self.coursedir.format_path(self.coursedir.submitted_directory, entry.student,
                                               self.coursedir.assignment_id)
        if os.path.isdir(dest_path):
            existing = self.coursedir.get_existing_timestamp(dest_path)
            if not ((self.update and (existing is None or entry.kernel > existing))
                    or (self.before_duedate and existing != entry.kernel)):
                if existing is not None and entry.kernel > existing:
                    self._not_taken(entry, existing)
                    return
                entry.status, entry.reason = "kept", "already collected"
                self.log.info("Submission already collected: %s %s", entry.student, self.coursedir.assignment_id)
                return
        parent = os.path.dirname(dest_path)
        with _writing(dest_path):
            os.makedirs(parent, exist_ok=True)
            staging = tempfile.mkdtemp(prefix=f".{self.coursedir.assignment_id}.collecting-", dir=parent)
        try:
            staged = os.path.join(staging, "submission")
            with _writing(dest_path):
                os.mkdir(staged, 0o770)
                dest_fd = os.open(staged, _DIR_FLAGS)
            try:
                walk = self._walk_entry(entry, dest_fd)
                # The copy's own change times count too: a file changed during the collect is later.
                entry.kernel = max(entry.kernel, _utc_from_ns(walk.ctime_ns))
                with _writing(dest_path), _opened("timestamp.txt", os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC,
                                                  dest_fd, 0o660) as out:
                    os.write(out, entry.kernel.strftime("%Y-%m-%d %H:%M:%S.%f UTC").encode())
            finally:
                os.close(dest_fd)
            with _writing(dest_path):
                if os.path.isdir(dest_path):
                    self.log.info("Updating submission: %s %s", entry.student, self.coursedir.assignment_id)
                    previous = os.path.join(staging, "previous")
                    os.rename(dest_path, previous)
                    try:
                        os.rename(staged, dest_path)
                    except OSError:
                        os.rename(previous, dest_path)  # the earlier collected copy stays
                        raise
                else:
                    self.log.info("Collecting submission: %s %s", entry.student, self.coursedir.assignment_id)
                    os.rename(staged, dest_path)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
        entry.status, entry.reason = "collected", ""

    def _not_taken(self, entry: Entry, collected: datetime.datetime) -> None:
        """A submission newer than the student's collected copy, left in the exchange (nbgrader's rule: only
        --update replaces a collected copy): said as a warning and flagged in the report, since grading would
        otherwise grade the older copy with nothing to show for it."""
        assignment = self.coursedir.assignment_id
        entry.status = "not collected"
        entry.reason = (f"newer than the copy collected before ({collected:%Y-%m-%d %H:%M:%S} UTC), which stays and "
                        f"is what `make grade` grades: `nbgrader collect --update {assignment}` takes this one")
        entry.flag = "; ".join(filter(None, [entry.flag, "submitted again after the collect: not collected"]))
        self.not_taken.append(entry.student)
        self.log.warning("%s submitted %s again at %s, after the copy collected at %s: `make grade` grades the older "
                         "copy, which stays; `nbgrader collect --update %s` collects the newer one",
                         entry.student, assignment, f"{entry.kernel:%Y-%m-%d %H:%M:%S} UTC",
                         f"{collected:%Y-%m-%d %H:%M:%S} UTC", assignment)

    def _write_report(self) -> None:
        """One row per entry of this assignment; the rows of other assignments (and, with
        --student, of other students) are kept.  Every cell is made inert for a spreadsheet: entry
        names, paths in reasons and flags are the student's."""
        path = os.path.join(self.coursedir.root, self.report_name)
        assignment = self.coursedir.assignment_id
        summaries = self._unexamined_rows()
        students = {e.student for e in self.entries} | {row[1] for row in summaries}
        everyone = self.coursedir.student_id in ("", "*")
        kept = []
        if os.path.isfile(path):
            with open(path, newline="") as handle:
                kept = [row for row in csv.DictReader(handle) if row.get("assignment") != assignment
                        or not (everyone or row.get("student") in students)]
        fd, temporary = tempfile.mkstemp(prefix=f".{self.report_name}.", dir=self.coursedir.root)
        with os.fdopen(fd, "w", newline="") as handle:
            writer = csv.writer(handle)
            writer.writerow(REPORT_COLUMNS)
            for row in kept:
                writer.writerow(spreadsheet.row(row.get(column, "") for column in REPORT_COLUMNS))
            for row in summaries:  # first: the class report shows a report's first flagged rows
                writer.writerow(spreadsheet.row(row))
            for entry in sorted(self.entries, key=lambda e: (e.student, e.name)):
                writer.writerow(spreadsheet.row(entry.row(assignment)))
        os.chmod(temporary, 0o640)
        os.replace(temporary, path)
        self.log.info("Collect report: %s", path)


@contextlib.contextmanager
def _writing(path: str):
    """An error writing the copy is the course's (disk full, say), not the entry's: it stops the collect."""
    try:
        yield
    except OSError as error:
        raise CollectFailed(f"cannot write the collected copy of {path}: {error}") from error


@contextlib.contextmanager
def _opened(name, flags, dir_fd=None, mode=0o777):
    fd = os.open(name, flags, mode, dir_fd=dir_fd)
    try:
        yield fd
    finally:
        os.close(fd)


def _listed(fd: int, walk: _Walk) -> list[str]:
    """The names in the folder fd, each counted toward the entry's limit as it is read, ignored names
    too (each is an inode to list all the same): the listing stops at the limit, however many remain."""
    names = []
    with os.scandir(fd) as listing:
        for item in listing:
            walk.items += 1
            if walk.items > walk.max_items:
                raise Refused(f"more than {walk.max_items} files and folders (ignored names such as .* included)")
            names.append(item.name)
    return names


def _same(before: os.stat_result, after: os.stat_result, path: str) -> None:
    """What was opened is what was looked at (not swapped for something else in between)."""
    if (before.st_dev, before.st_ino) != (after.st_dev, after.st_ino) or \
            stat.S_IFMT(before.st_mode) != stat.S_IFMT(after.st_mode):
        raise Refused(f"{path} changed while it was collected")


def _user_name(uid: int) -> str:
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return f"uid {uid}"


def _utc_from_ns(ns: int) -> datetime.datetime:
    """A change time as nbgrader keeps times (naive UTC), to the microsecond as timestamp.txt stores it,
    so a collected time reads back equal."""
    return datetime.datetime(1970, 1, 1) + datetime.timedelta(microseconds=ns // 1000)
