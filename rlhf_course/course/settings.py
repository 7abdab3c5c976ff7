"""The course's configuration, read the way nbgrader's own commands read it, and the course directory it names.

``nbgrader_config`` (.json, then .py) from Jupyter's config paths (system-wide, then the user's), then
the course's own ``nbgrader_config.py``: later files win.  Beside nbgrader's settings sit the
course's (:class:`RlhfCourse`) and trusted grading's (:class:`TrustedGrading`, one setting per
limit of :class:`~rlhf_course.course.limits.Limits`).  Every folder (``submitted``, ``autograded``,
``feedback``, ``release``, ``source``) and the gradebook come from nbgrader's ``CourseDirectory``, so
a course that renames a folder or keeps its gradebook in PostgreSQL (``c.CourseDirectory.db_url``)
is graded where every other nbgrader command reads and writes.

One :class:`Course` (the course directory and its merged configuration: the files, then the command
line) is built by the command (:mod:`app`) and passed to everything that needs a setting: the batch,
the Dask workers (it pickles), the release (nbgrader's generate_assignment in this process, with it)
and the example class.  Nothing below the command reads the configuration files again.
"""
from __future__ import annotations

import copy
import dataclasses
import os
from dataclasses import dataclass
from pathlib import Path

from traitlets import Bool, Dict, Float, Integer, Unicode, validate
from traitlets.config import Config, Configurable

from rlhf_course.course.dates import parse_when
from rlhf_course.course.errors import CourseError
from rlhf_course.course.limits import Limits


# where trusted grading keeps what it builds once for every sandbox, unless c.TrustedGrading.cache_directory says
DEFAULT_CACHE_DIRECTORY = Path.home() / ".cache" / "rlhf-course"


class NotReady(CourseError, RuntimeError):
    """Grading cannot start; the message says what to do first."""


class RlhfCourse(Configurable):
    """The course, as `make release` records it in the gradebook."""

    due_date = Unicode("", help="Due date of every assignment not named in due_dates (UTC, e.g. "
                                "'2026-12-18 23:59:00 UTC'); `make release` records it where the gradebook has "
                                "none, and nbgrader's late penalty uses it.  Empty: no due date.").tag(config=True)
    due_dates = Dict(value_trait=Unicode(), key_trait=Unicode(), default_value={},
                     help="Due dates per assignment, e.g. {'rlhf': '2026-12-18 23:59 UTC', 'grpo': ...}: recorded "
                          "by `make release` only where the gradebook has none (a date set in the Formgrader "
                          "stays).").tag(config=True)

    students_share_this_machine = Bool(True, help="Students have accounts on the machine that holds this course: "
                                       "a release to an exchange outside the course is refused while other accounts "
                                       "could read its source/, instructor/ or i18n/ (the solutions and hidden tests; "
                                       "`chmod o-rwx <course>` first).  False only where no student can reach the "
                                       "course's files, e.g. the instructor's own pod on Kubernetes.").tag(config=True)

    # A date that is no date is refused as the configuration loads, naming the setting: every command that reads
    # the configuration stops there, before it writes anything, rather than at the release that would record it.
    @validate("due_date")
    def _due_date_is_a_date(self, proposal):
        if proposal["value"]:
            parse_when(proposal["value"], "c.RlhfCourse.due_date")
        return proposal["value"]

    @validate("due_dates")
    def _due_dates_are_dates(self, proposal):
        for assignment, text in proposal["value"].items():
            if text:
                parse_when(text, f"c.RlhfCourse.due_dates[{assignment!r}]")
        return proposal["value"]


LIMIT_FIELDS = {limit.name: limit for limit in dataclasses.fields(Limits)}


def limit_setting(name: str):
    """The setting of one limit: its type, default and help are the :class:`Limits` field's, their one source."""
    limit = LIMIT_FIELDS[name]
    trait = Integer if limit.type in ("int", int) else Float
    return trait(limit.default, help=limit.metadata["help"]).tag(config=True)


class TrustedGrading(Configurable):
    """`sudo make grade`: each submission in a fresh sandbox, scores decided outside it."""

    workers = Integer(0, help="Sandboxes graded at a time on this machine (0: one per CPU).").tag(config=True)
    dask_address = Unicode("", help="Address of an existing Dask scheduler (tls://host:8786) to send grading "
                                    "tasks to; empty: grade on this machine.").tag(config=True)
    dask_worker_wait = Float(600.0, help="Seconds a Dask batch waits with no worker connected to its scheduler "
                                         "before it stops (saying so every 30 s, or every quarter of this wait "
                                         "when shorter); the submissions graded by then stay recorded, the "
                                         "others' gradebook rows as they were.").tag(config=True)
    cache_directory = Unicode("", help="Where the grader keeps what it builds once for every sandbox (matplotlib's "
                                       "font list); empty: ~/.cache/rlhf-course of the user who grades.").tag(config=True)
    name_misconceptions = Bool(True, help="Feedback names the catalogued misconception a scored submission's lost "
                                          "cells match exactly (instructor/*catalogue.py; docs/grading.md); False: "
                                          "never.").tag(config=True)

    # One setting per field of Limits, in its order (tests/grading/test_settings.py holds the two to the same names)
    memory_bytes = limit_setting("memory_bytes")
    cgroup_memory_bytes = limit_setting("cgroup_memory_bytes")
    cpus = limit_setting("cpus")
    cpu_seconds = limit_setting("cpu_seconds")
    file_bytes = limit_setting("file_bytes")
    workspace_bytes = limit_setting("workspace_bytes")
    processes = limit_setting("processes")
    startup_seconds = limit_setting("startup_seconds")
    call_seconds = limit_setting("call_seconds")
    feedback_seconds = limit_setting("feedback_seconds")
    submission_seconds = limit_setting("submission_seconds")
    slow_calls = limit_setting("slow_calls")
    render_seconds = limit_setting("render_seconds")
    min_render_seconds = limit_setting("min_render_seconds")
    submitted_notebook_bytes = limit_setting("submitted_notebook_bytes")
    cells = limit_setting("cells")
    reply_bytes = limit_setting("reply_bytes")
    notebook_bytes = limit_setting("notebook_bytes")
    log_bytes = limit_setting("log_bytes")

    def limits(self) -> Limits:
        """The limits these settings give, as one value for every sandbox."""
        return Limits(**{name: getattr(self, name) for name in LIMIT_FIELDS})


def course_config(root: Path) -> Config:
    """The course's configuration, loaded as nbgrader's commands load it from the course root."""
    from jupyter_core.paths import jupyter_config_path
    from traitlets.config.loader import JSONFileConfigLoader, PyFileConfigLoader

    config = Config()
    for folder in [*reversed(jupyter_config_path()), str(root)]:
        for loader, name in ((JSONFileConfigLoader, "nbgrader_config.json"), (PyFileConfigLoader, "nbgrader_config.py")):
            if os.path.isfile(os.path.join(folder, name)):
                config.merge(loader(name, path=folder).load_config())
    return config


@dataclass(frozen=True)
class Course:
    """A course directory with its configuration: where each of nbgrader's steps keeps its files.
    Plain data (a path and a traitlets ``Config``), so it pickles for a Dask worker."""

    root: Path
    config: Config

    @classmethod
    def at(cls, root: Path, config: Config | None = None) -> "Course":
        """The course in ``root`` (its configuration read from there unless given, e.g. by an app).
        Its root is ``CourseDirectory.root`` when the configuration sets one (nbgrader's own rule: the
        course's nbgrader_config.py names its folder; ``--CourseDirectory.root=...`` moves the course).
        The course's own settings are checked here (a due date that is no date:
        :class:`~rlhf_course.course.dates.DeadlineError`, naming the setting)."""
        root = Path(root).resolve()
        config = copy.deepcopy(config) if config is not None else course_config(root)  # the caller's stays as it is
        if "root" not in config.get("CourseDirectory", {}):
            config.CourseDirectory.root = str(root)
        RlhfCourse(config=config)
        from nbgrader.coursedir import CourseDirectory
        return cls(Path(CourseDirectory(config=config).root).resolve(), config)

    def with_config(self, **sections: dict) -> "Course":
        """This course with some settings changed (``with_config(TrustedGradingOnly={"allow": True})``)."""
        config = copy.deepcopy(self.config)  # Config(...) would share (and merge() change) its sections
        config.merge(Config(sections))
        RlhfCourse(config=config)
        return Course(self.root, config)

    @property
    def coursedir(self):
        from nbgrader.coursedir import CourseDirectory
        return CourseDirectory(config=self.config)

    @property
    def db_url(self) -> str:
        """The gradebook every nbgrader command of this course uses (``CourseDirectory.db_url``)."""
        return self.coursedir.db_url

    def folder(self, step: str, student: str = ".", assignment: str = "") -> Path:
        """``step`` is one of source, release, submitted, autograded, feedback (nbgrader's names)."""
        coursedir = self.coursedir
        return Path(os.path.normpath(coursedir.format_path(getattr(coursedir, f"{step}_directory"), student, assignment)))

    def settings(self) -> tuple[RlhfCourse, TrustedGrading]:
        return RlhfCourse(config=self.config), TrustedGrading(config=self.config)

    @property
    def grading(self) -> TrustedGrading:
        """Trusted grading's settings (workers, Dask, the cache, every limit)."""
        return TrustedGrading(config=self.config)

    @property
    def cache_directory(self) -> Path:
        """``TrustedGrading.cache_directory``, or ~/.cache/rlhf-course."""
        return Path(self.grading.cache_directory or DEFAULT_CACHE_DIRECTORY).expanduser()

    def late_policy(self):
        """The late-submission plugin nbgrader's autograde would use, from the course's config."""
        from traitlets.utils.importstring import import_item
        plugin_class = self.config.AssignLatePenalties.get("plugin_class", "nbgrader.plugins.LateSubmissionPlugin")
        plugin_class = import_item(plugin_class) if isinstance(plugin_class, str) else plugin_class
        return plugin_class(config=self.config)


def shown_url(db_url: str) -> str:
    """The gradebook URL as it may be printed: without its password."""
    from sqlalchemy.engine import make_url
    return make_url(db_url).render_as_string(hide_password=True)
