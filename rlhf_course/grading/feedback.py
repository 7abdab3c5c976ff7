"""What a student reads back: the feedback page (each test's name, points and message, the written
answers' scores, then the notebook as it ran; never the hidden tests' code), the autograded copy
the Formgrader shows, and the files ``nbgrader release_feedback`` expects beside them."""
from __future__ import annotations

import html
import os
import stat
from dataclasses import dataclass, field
from pathlib import Path

import nbformat

from rlhf_course.grading import notebooks, safe_html
from rlhf_course.grading.canonical import with_outputs
from rlhf_course.grading.limits import Limits
from rlhf_course.grading.misconceptions import misconception_line
from rlhf_course.grading.page_process import KILL_GRACE, PageProcess, PageProcessError
from rlhf_course.grading.results import SubmissionResult, note, one_line, printable
from rlhf_course.grading.settings import Course
from rlhf_course.i18n import t


_EXPORTER = None


def _exporter():
    """One HTML exporter for the batch (building it loads templates), sanitising what the
    student wrote: no script, event handler or iframe from a notebook reaches the page.  It
    renders the release's cells once per batch (see :mod:`feedback_html`)."""
    global _EXPORTER
    if _EXPORTER is None:
        from rlhf_course.grading.feedback_html import make_exporter
        _EXPORTER = make_exporter()
    return _EXPORTER


def _shown_notebook(result: SubmissionResult, max_cells: int, notes: list[str]):
    """The notebook pages show: the canonical copy (intake's, trusted) with the outputs of the course's
    run of it, when that run came back as that copy; None when the submission could not be read."""
    if not result.canonical_notebook:
        return None
    canonical = nbformat.reads(result.canonical_notebook, as_version=4)
    nb, ran = with_outputs(canonical, result.executed_notebook, max_cells)
    if result.executed_notebook and not ran:
        notes.append(t("the feedback copy of the notebook came back unreadable", result.language))
    return nb


SUBMISSION_FILES = ("timestamp.txt", "submission_secret.txt")  # what nbgrader's release_feedback reads


def _small_regular_file(path: Path, limit: int = 4096) -> str | None:
    """A short text file the student submitted, read without following links (None otherwise)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as handle:
        if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
            return None
        data = handle.read(limit + 1)
    if len(data) > limit:
        return None
    text = data.decode("utf-8", errors="replace")
    return text if text.strip().isprintable() else None


def submission_files(submitted: Path) -> dict[str, str]:
    """``timestamp.txt`` and ``submission_secret.txt`` as nbgrader expects them beside a feedback page
    (the secret names the page in the exchange; a submission that never went through the exchange
    gets a fresh one, so that ``nbgrader release_feedback`` never stops on it)."""
    import datetime as dt
    import secrets
    files = {name: _small_regular_file(submitted / name) for name in SUBMISSION_FILES}
    if not files["timestamp.txt"]:
        files["timestamp.txt"] = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S.%f UTC")
    if not files["submission_secret.txt"]:
        files["submission_secret.txt"] = secrets.token_hex(64)
    return files


def render_seconds(result: SubmissionResult, limits: Limits) -> float:
    """The page's time budget: what is left of the submission's budget, within the limits' bounds."""
    return min(limits.render_seconds, max(limits.min_render_seconds, limits.submission_seconds - result.seconds))


def _outputs_withheld(nb, seconds: float) -> None:
    """The autograded copy when making its outputs safe did not finish in time: no output is kept."""
    note = f"[outputs not shown: making this notebook's outputs safe to display took more than {seconds:.1f} s]\n"
    nb.metadata.pop("widgets", None)
    for cell in nb.cells:
        if cell.get("outputs"):
            cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text=note)]


def _summary(result: SubmissionResult) -> str:
    """The page's head, in Markdown (the exporter sanitises a markdown cell's raw HTML and escapes
    headings, paragraphs and table headers): the total, the outcome, each test and each written answer."""
    language = result.language
    rows = "".join(f"| `{c.grade_id}` | {c.score:g} / {c.points:g} "
                   f"| {t('passed' if c.score == c.points else 'failed', language)} "
                   f"| {table_text(c.message)} |\n" for c in result.cells.values())
    written_score, written_points, written_rows = written_answer_rows(result, language)
    detail = table_text(result.detail.splitlines()[0] if result.detail else "")
    return (f"## {table_text(result.assignment)}: {result.score + written_score:g} / "
            f"{result.max_score + written_points:g}\n\n"
            + t("Outcome: **{state}**.", language, state=t(result.state, language)) + f" {detail}\n\n"
            + t("Tests: {score:g} / {points:g}.", language, score=result.score, points=result.max_score) + "\n\n"
            + t("| test | points | result | property |", language) + f"\n|---|---|---|---|\n{rows}"
            + misconception_line(result)
            + written_rows)


@dataclass
class Page:
    """What one render made: the feedback page, the autograded copy (None when the submission could not
    be read) and the notes for the grading report (the child's copy of the result is not the caller's)."""
    html: str
    autograded_copy: str | None
    notes: list[str] = field(default_factory=list)


def _scores_only(result: SubmissionResult, summary: str, reason: str) -> str:
    why = t("The notebook is not shown here: {reason}. Your instructor sees it in the Formgrader.",
            result.language, reason=reason)
    page = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell(summary),
                                           nbformat.v4.new_markdown_cell(f"**{why}**")])
    return _exporter().from_notebook_node(page)[0]


def render_page(result: SubmissionResult, max_cells: int, seconds: float) -> Page:
    """In the page process (:mod:`page_process`): the feedback page and the autograded copy, the
    notebook's outputs made safe and bounded (:mod:`safe_html`), within ``seconds``; over them, the page
    is the scores and why, and the copy keeps no output."""
    notes: list[str] = []
    summary = _summary(result)
    nb = _shown_notebook(result, max_cells, notes)
    exporter = _exporter()  # built once per page process (templates), outside any page's budget
    over_budget, autograded_copy = None, None
    with safe_html.render_budget(seconds):
        try:
            if nb is not None:
                try:
                    safe_html.bound_notebook(nb)
                except safe_html.RenderBudgetExceeded:
                    _outputs_withheld(nb, seconds)
                    raise
                finally:
                    annotate_grade_cells(nb, result, result.language)
                    autograded_copy = nbformat.writes(nb)  # what the Formgrader shows
            else:
                nb = nbformat.v4.new_notebook()
            nb.cells.insert(0, nbformat.v4.new_markdown_cell(summary))
            body, _ = exporter.from_notebook_node(nb)
        except safe_html.RenderBudgetExceeded as exc:
            over_budget = exc
    if over_budget is not None:  # our own short text: renders in milliseconds, outside the budget
        body = _scores_only(result, summary, str(over_budget))
        notes.append(f"feedback page without the notebook: {over_budget}")
    return Page(body, autograded_copy, notes)


def render_scores_only(result: SubmissionResult, reason: str) -> str:
    """In the page process: the page of a submission whose render was stopped (our own short text)."""
    return _scores_only(result, _summary(result), reason)


def _stripped_copy(result: SubmissionResult, max_cells: int, seconds: float) -> str | None:
    """The autograded copy when its render process was killed: the canonical copy, no output kept
    (built here, in linear time, without parsing any HTML)."""
    nb = _shown_notebook(result, max_cells, [])
    if nb is None:
        return None
    _outputs_withheld(nb, seconds)
    annotate_grade_cells(nb, result, result.language)
    return nbformat.writes(nb)


_PAGES: dict[str, PageProcess] = {}


def page_process(target: str = "render_page") -> PageProcess:
    """The batch's page process for ``target`` (started on first use, replaced when killed)."""
    if target not in _PAGES:
        _PAGES[target] = PageProcess(f"{__name__}:{target}", warm_up=f"{__name__}:_exporter")
    return _PAGES[target]


def _plain_page(result: SubmissionResult, reason: str) -> str:
    """The last resort, written here without any renderer: the scores as escaped text."""
    return (f"<!DOCTYPE html><html><head><meta charset='utf-8'></head><body><pre>"
            f"{html.escape(_summary(result))}\n\n{html.escape(reason)}</pre></body></html>")


def write_feedback(course: Course, result: SubmissionResult, limits: Limits = Limits(),
                   seconds: float | None = None) -> Path:
    """feedback/<student>/<assignment>/<notebook>.html: each test's name, points and message,
    then the student's notebook as it ran; never the hidden tests' code.  Both the page and the
    autograded copy are made in the page process (:func:`render_page`) within ``seconds`` (default:
    what the limits leave this submission); a render that overruns is stopped by the page's own
    budget, or its process killed :data:`page_process.KILL_GRACE` later: the page is then only the
    scores and why, and the batch goes on."""
    seconds = render_seconds(result, limits) if seconds is None else seconds
    reason = t("rendering was stopped after {seconds:.1f} s", result.language, seconds=seconds + KILL_GRACE)
    try:
        page = page_process().call((result, limits.cells, seconds), seconds + KILL_GRACE)
        problem = None if page else f"its render process was killed after {seconds + KILL_GRACE:.1f} s"
    except PageProcessError as exc:  # the page raised, or no page process could start
        page, problem = None, str(exc)
        reason = t("the page could not be rendered", result.language)
    if page is None:
        note(result, f"feedback page without the notebook: {problem}")
        try:
            body = page_process("render_scores_only").call((result, reason), limits.min_render_seconds + KILL_GRACE)
        except PageProcessError:
            body = None
        page = Page(body or _plain_page(result, reason), _stripped_copy(result, limits.cells, seconds))
    for text in page.notes:
        note(result, text)
    out = course.folder("feedback", result.student, result.assignment) / result.notebook.replace(".ipynb", ".html")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(page.html)
    graded = course.folder("autograded", result.student, result.assignment)
    graded.mkdir(parents=True, exist_ok=True)
    for name, text in submission_files(course.folder("submitted", result.student, result.assignment)).items():
        for folder in (out.parent, graded):  # where release_feedback and generate_feedback look
            (folder / name).write_text(text)
    if page.autograded_copy:  # where nbgrader keeps autograded notebooks
        (graded / result.notebook).write_text(page.autograded_copy)
    return out


def table_text(text: str) -> str:
    """Text from a submission or a check, safe in one Markdown table cell: printable, one line,
    HTML escaped (it shows as text, never as markup), pipes and emphasis characters escaped."""
    text = html.escape(one_line(text)[:2000], quote=False)
    for char in "\\`*_|[]":  # the backslash first
        text = text.replace(char, "\\" + char)
    return text


def written_answer_rows(result: SubmissionResult, language: str = "en") -> tuple[float, float, str]:
    """The written answers' scores so far, their points, and a Markdown table of them for the feedback page."""
    if not result.written:
        return 0.0, 0.0, ""
    score = sum(w.get("score") or 0.0 for w in result.written.values())
    points = sum(w.get("points", 0.0) for w in result.written.values())
    rows = "".join(
        f"| `{gid}` | " + (f"{w['score']:g}" if w.get("score") is not None else "?") + f" / {w.get('points', 0):g} "
        f"| {t('graded' if w.get('score') is not None else 'awaiting a person', language)} "
        f"| {table_text(w.get('comment') or '')} |\n"
        for gid, w in result.written.items())
    table = ("\n" + t("Written answers, graded by a person: {score:g} / {points:g} so far.", language,
                      score=score, points=points)
             + "\n\n" + t("| answer | points | status | comment |", language) + f"\n|---|---|---|---|\n{rows}")
    return score, points, table


def annotate_grade_cells(nb, result: SubmissionResult, language: str = "en") -> None:
    """Each test cell gets the trusted verdict as an output (the hidden ones show only their name
    in the student's copy): the Formgrader and the feedback page say why a test scored 0."""
    for cell in nb.cells:
        graded = result.cells.get(notebooks.grade_id(cell) or "")
        if graded is None or cell.cell_type != "code":
            continue
        verdict = t("passed" if graded.score == graded.points else "FAILED", language)
        text = (f"[{t('trusted grader', language)}] {verdict} ({graded.score:g} / {graded.points:g}): "
                f"{printable(graded.message)}\n")
        cell.outputs.append(nbformat.v4.new_output("stream", name="stdout", text=text))
