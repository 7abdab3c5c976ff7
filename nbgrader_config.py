"""nbgrader configuration for the RLHF course.  nbgrader reads it from the current directory,
so run nbgrader commands from the course root (the Makefile does)."""
import os
from pathlib import Path

import nbgrader
from nbconvert.preprocessors import ClearMetadataPreprocessor
from nbgrader.converters import GenerateAssignment
from nbgrader.preprocessors import (AssignLatePenalties, CheckCellMetadata, ClearOutput, ClearSolutions, DeduplicateIds,
                                    Execute, IgnorePattern, LimitOutput, OverwriteCells, OverwriteKernelspec,
                                    SaveAutoGrades)

from rlhf_course import exchange
from rlhf_course.classroom import config
from rlhf_course.grading import pages
from rlhf_course.grading.nbgrader_ext import EditionAnswerStubs, GrantedExtension, StderrIsNotFailure, TrustedGradingOnly

c = get_config()  # noqa: F821  (provided by traitlets when it loads this file)

COURSE_ROOT = Path(__file__).resolve().parent

c.CourseDirectory.root = str(COURSE_ROOT)

# The students' settings (rlhf_course/classroom/config.py), the same here: the exchange, course-local by default
# (works on one machine without editing); a JupyterHub server sets RLHF_EXCHANGE_ROOT (e.g. /srv/nbgrader/exchange)
# here and in the students' system-wide config.  Submissions are private to their student and the instructors'
# group.  And Validate's (autograde's) limits: 120 s a cell (nbgrader's own default is 30 s; generate_config shows
# nbconvert's instead); the slowest cell here takes a few seconds.
config.student(c, *exchange.from_environment(COURSE_ROOT))

# Due date and late policy, in one place: `make release` records the due date in the gradebook;
# autograde (stock or ours) applies the penalty, and `nbgrader export` shows it per student.
c.RlhfCourse.due_date = os.environ.get("RLHF_DUE_DATE", "2026-12-18 23:59:00 UTC")
c.AssignLatePenalties.plugin_class = "rlhf_course.grading.gradebook.late_penalty.PenaltyPerHour"
c.PenaltyPerHour.points_per_hour = 2.0
c.PenaltyPerHour.zero_after_hours = 72.0

# `nbgrader export`: one row per student and assignment, a language edition (i18n/, e.g. rlhf_zh)
# folded into its assignment with an `edition` column (stock export would list the student twice).
c.ExportApp.plugin_class = "rlhf_course.grading.gradebook.export.EditionsCsvExport"
c.EditionsCsvExport.course_root = str(COURSE_ROOT)

# The gradebook: sqlite in the course root unless a SQLAlchemy URL says otherwise
# (e.g. postgresql+psycopg2://grader@db-host/rlhf for a large course).
c.CourseDirectory.db_url = os.environ.get("RLHF_GRADEBOOK_URL", f"sqlite:///{COURSE_ROOT / 'gradebook.db'}")
c.CourseDirectory.ignore = [".ipynb_checkpoints", "*.pyc", "__pycache__", "feedback", ".*"]

# Trusted grading (`sudo make grade`); its command-line options win over these.  Every setting, with
# its default: python -m rlhf_course.grading grade --help-all
c.TrustedGrading.workers = 0  # sandboxes at a time on this machine; 0: one per CPU
c.TrustedGrading.submission_seconds = 300.0  # all calls plus the feedback run of one submission

# Hidden test cells import the instructor-only checks; the kernels nbgrader starts inherit this.
# nbgrader loads this file several times in one process: add each folder once.
_search_path = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
os.environ["PYTHONPATH"] = os.pathsep.join(
    [folder for folder in (str(COURSE_ROOT / "instructor"), str(COURSE_ROOT)) if folder not in _search_path]
    + _search_path)

# A language edition's release says "write your code here" in its language (the stubs travel in the
# edition's notebook metadata); nbgrader's generate steps are otherwise its own, in its order.
c.GenerateAssignment.preprocessors = [EditionAnswerStubs if step is ClearSolutions else step
                                      for step in GenerateAssignment.class_traits()["preprocessors"].default()]

# A warning printed by a test cell must not zero a correct answer (nbgrader scores stderr as 0); an extension
# granted before the student submitted reaches the submission before its late penalty is assigned.
c.Autograde.autograde_preprocessors = [
    Execute, StderrIsNotFailure, IgnorePattern, ClearMetadataPreprocessor, LimitOutput,
    SaveAutoGrades, GrantedExtension, AssignLatePenalties, CheckCellMetadata,
]

# Grading is `sudo make grade` (sandboxed).  Stock in-kernel autograde, including the Formgrader's
# per-student Autograde button, refuses with a message naming it, unless allowed here.
c.TrustedGradingOnly.allow = os.environ.get("RLHF_ALLOW_STOCK_AUTOGRADE") == "1"
c.Autograde.sanitize_preprocessors = [
    TrustedGradingOnly, ClearOutput, DeduplicateIds, OverwriteKernelspec, OverwriteCells, CheckCellMetadata,
]
# Refused before nbgrader clears a student's autograded/ folder (it does, for --force or a newer submission):
# `make grade`'s copy and grading record stay.
c.Autograde.exporter_class = "rlhf_course.grading.nbgrader_ext.TrustedGradingOnlyExporter"

# The Formgrader shows submissions with MathJax from this Jupyter server (the jupyter_server_mathjax
# extension), not from nbconvert's CDN default: offline the CDN leaves LaTeX raw and stops the page's
# script.  Our formgrade/mathjax.html.j2 (rlhf_course/grading/pages/templates/) comes first; nbgrader's own templates follow.
# What a student wrote reaches the instructor's browser only through the course's allowlist sanitiser
# (rlhf_course/grading/pages/safe_html.py): sanitize_html makes nbconvert's templates pass outputs through
# clean_html and drop script and widget outputs; nbgrader's formgrade template renders markdown cells
# with markdown2html alone, so that filter sanitises too.
# The page's elements are named by the page alone (no id, name or class from a student, no heading
# anchors), and code is highlighted with the course's one lexer, whatever a notebook's metadata says.
c.HTMLExporter.sanitize_html = True
c.HTMLExporter.exclude_anchor_links = True
c.HTMLExporter.filters = {"markdown2html": "rlhf_course.grading.pages.safe_html.SafeMarkdown",
                          "clean_html": "rlhf_course.grading.pages.safe_html.FormgraderClean",
                          "highlight_code": "rlhf_course.grading.pages.safe_html.CourseHighlight"}
c.HTMLExporter.extra_template_basedirs = [
    str(pages.TEMPLATES),
    str(Path(nbgrader.__file__).parent / "server_extensions" / "formgrader" / "templates"),
]

# One feedback page: `nbgrader generate_feedback` and the Formgrader's *Generate Feedback* write the course's page
# (from the grading record `make grade` keeps, with the gradebook's current grades), never stock nbgrader's; and
# release_feedback rewrites any page a person's grade changed since (rlhf_course/grading/pages/returned_feedback.py).
c.GenerateFeedback.exporter_class = "rlhf_course.grading.pages.returned_feedback.CourseFeedbackExporter"
c.StrictExchangeReleaseFeedback.before_release = "rlhf_course.grading.pages.returned_feedback.before_release"
