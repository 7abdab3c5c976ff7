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

from rlhf_course.course import notebooks
from rlhf_course.grading.pages import safe_html
from rlhf_course.grading import canonical
from rlhf_course.grading.canonical import with_outputs
from rlhf_course.course.limits import Limits
from rlhf_course.grading.misconceptions import misconception_lines
from rlhf_course.grading.pages.page_process import KILL_GRACE, PageProcess, PageProcessError
from rlhf_course.grading.results import SubmissionResult, note, one_line, printable
from rlhf_course.grading.pages.grading_record import keep_record
from rlhf_course.course.settings import Course
from rlhf_course.i18n import t


_EXPORTER = None


def _exporter():
    """One HTML exporter for the batch (building it loads templates), sanitising what the
    student wrote: no script, event handler or iframe from a notebook reaches the page.  It
    renders the release's cells once per batch (see :mod:`feedback_html`)."""
    global _EXPORTER
    if _EXPORTER is None:
        from rlhf_course.grading.pages.feedback_html import make_exporter
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


CELL_TEXT_CHARS = 2000  # of a message, a detail or a comment on the scores: one line, cut there


def _cell_text(text: str) -> str:
    """Text from a submission or a check for the scores: printable, one line, bounded (the template escapes it)."""
    return one_line(text)[:CELL_TEXT_CHARS]


def _around(sentence: str, language: str, **fields) -> dict:
    """A translated sentence of one field, as the text before it, the field's value and the text after it
    (the template sets the value in bold)."""
    (name, value), = fields.items()
    before, _, after = t(sentence, language, **{name: "\0"}).partition("\0")
    return {"before": before, name: value, "after": after}


def scores(result: SubmissionResult) -> dict:
    """The scores the page shows above the notebook, as data for the feedback template (``resources["scores"]``),
    every sentence in the submission's language: first a summary (the total, after the late penalty when there is
    one, the outcome, the failed tests, the named misconceptions), then each test, then the written answers."""
    language = result.language
    written = _written_answers(result, language)
    score = result.score + (written["score"] if written else 0.0)
    points = result.max_score + (written["points"] if written else 0.0)
    waiting = bool(written and written["waiting"])
    # the tests' outcome is not the page's while a person has still to grade an answer
    state = t(result.state, language)
    if waiting:
        state = t("{state}; written answers awaiting a person", language, state=state)
    return {
        "assignment": _cell_text(result.assignment),
        "score": score,
        "points": points,
        "so_far": t("(so far)", language) if waiting else "",
        "after_penalty": _after_penalty(result.deadline, score, points, language),
        "failed": _failed_tests(result, language),
        "outcome": _around("Outcome: {state}.", language, state=state),
        "detail": _cell_text(result.student_detail.splitlines()[0] if result.student_detail else ""),
        "tests": {
            "sentence": t("Tests: {score:g} / {points:g}.", language, score=result.score, points=result.max_score),
            "headings": [t(heading, language) for heading in ("test", "points", "result", "property")],
            "rows": [{"grade_id": c.grade_id, "score": c.score, "points": c.points, "passed": c.score == c.points,
                      "result": t("passed" if c.score == c.points else "failed", language),
                      "text": _cell_text(c.message)} for c in result.cells.values()],
        },
        "misconceptions": misconception_lines(result),
        "written": written,
        "deadline": deadline_line(result.deadline, language),
    }


def _after_penalty(deadline: dict, score: float, points: float, language: str) -> str:
    """"After the late penalty: 0 / 50." when the submission lost points for lateness, else empty."""
    penalty = deadline.get("penalty") or 0.0
    if penalty <= 0:
        return ""
    return t("After the late penalty: {score:g} / {points:g}.", language, score=max(score - penalty, 0.0),
             points=points)


def _failed_tests(result: SubmissionResult, language: str) -> dict | None:
    """The tests that lost points, each with its line, for the summary at the top of the page."""
    lines = [{"grade_id": c.grade_id, "text": _cell_text(c.message)} for c in result.cells.values()
             if c.score < c.points]
    if not lines:
        return None
    return {"sentence": t("{count} of {total} tests lost points:", language, count=len(lines),
                          total=len(result.cells)), "lines": lines}


def verdicts(result: SubmissionResult) -> dict:
    """The grader's verdict on each test cell, by grade id, for the panel the page's template draws under the cell
    (the student's lines: :attr:`CellResult.message`)."""
    language = result.language
    return {c.grade_id: {"passed": c.score == c.points,
                         "head": t("{grader}: {verdict} ({score:g} / {points:g})", language,
                                   grader=t("trusted grader", language), score=c.score, points=c.points,
                                   verdict=t("passed" if c.score == c.points else "FAILED", language)),
                         "text": _cell_text(c.message)} for c in result.cells.values()}


def deadline_line(deadline: dict, language: str) -> str:
    """"due 2026-12-18 23:59 UTC, your extension +48 h, submitted 2026-12-20 10:00 UTC: on time" (or "late by
    2 h 10 min (penalty -6 points)"), from the gradebook's data only (``SubmissionResult.deadline``); empty when
    the assignment has no due date or the submission no time."""
    from rlhf_course.exchange.deadlines import how_late, shown
    due, submitted = deadline.get("due"), deadline.get("submitted")
    if due is None or submitted is None:
        return ""
    parts = [t("due {due}", language, due=shown(due))]
    if deadline.get("extension"):
        hours = deadline["extension"].total_seconds() / 3600
        parts.append(t("your extension +{hours} h", language, hours=f"{hours:g}"))
    parts.append(t("submitted {when}", language, when=shown(submitted)))
    late = deadline.get("seconds_late") or 0.0
    if late > 0:
        verdict = t("late by {late} (penalty -{points} points)", language, late=how_late(late, language),
                    points=f"{deadline.get('penalty') or 0.0:g}")
    else:
        verdict = t("on time", language)
    return t("{parts}: {verdict}", language, parts=t(", ", language).join(parts), verdict=verdict)


def _written_answers(result: SubmissionResult, language: str) -> dict | None:
    """The written answers' scores so far (None for one a person has not graded yet), their points and comments."""
    if not result.written:
        return None
    score = sum(w.get("score") or 0.0 for w in result.written.values())
    points = sum(w.get("points", 0.0) for w in result.written.values())
    waiting = any(_written_status(w) == "awaiting a person" for w in result.written.values())
    return {
        "score": score, "points": points, "waiting": waiting,
        "sentence": t("Written answers, graded by a person: {score:g} / {points:g} so far." if waiting else
                      "Written answers, graded by a person: {score:g} / {points:g}.", language,
                      score=score, points=points),
        "headings": [t(heading, language) for heading in ("answer", "points", "status", "comment")],
        "rows": [{"grade_id": gid, "score": w.get("score"), "points": w.get("points", 0.0),
                  "result": t(_written_status(w), language),
                  "text": _cell_text(w.get("comment") or ""),  # the last resort's plain page
                  "comment": _comment_markdown(w.get("comment") or "")} for gid, w in result.written.items()],
    }


def _comment_markdown(comment: str) -> str:
    """A person's comment from the Formgrader, kept as Markdown (its line breaks are its paragraphs and lists):
    printable and bounded; the template renders it, maths included, and sanitises it as a markdown cell."""
    return printable(comment)[:CELL_TEXT_CHARS]


def _written_status(written: dict) -> str:
    if written.get("answered") is False:
        return "not answered"
    return "graded" if written.get("score") is not None else "awaiting a person"


# What the page says above a grade cell that grading put back as the release's (canonical.restored_cells), by why.
# "Used", not "run and graded": a locked markdown cell is neither run nor graded, a set-up cell is not graded.
RESTORED_NOTES = {
    canonical.EDITED: "Your copy of this cell was changed. It is a locked cell: grading used the release's cell, "
                      "shown here, instead of yours.",
    canonical.DELETED: "This cell was missing from your notebook (deleted). Grading put back the release's cell, "
                       "shown here, and used it.",
    canonical.METADATA_EDITED: "This cell's nbgrader metadata (its points, or whether it is locked, graded or an "
                               "answer) was changed in your copy: it was graded with the release's metadata.",
    canonical.TYPE_CHANGED: "This answer cell was turned into a cell of another type in your copy, so your text in "
                            "it was not graded: grading used the release's cell, shown here, instead.",
}


RESTORED_SUMMARY = ("{count} cell(s) of your notebook were graded as released, not as your copy has them: a note "
                    "above each says why.")


def restored_notes(result: SubmissionResult, nb) -> dict[str, str]:
    """Grade id -> what the page says above that cell of ``nb`` (the canonical copy shown): why the release's cell
    (or its metadata) was graded rather than the student's copy, in the submission's language; only the grader's
    own sentences, never a word of the cell (a hidden test cell's text stays the release's header)."""
    grade_ids = set(notebooks.cells_by_grade_id(nb))
    return {gid: " ".join(t(RESTORED_NOTES[kind], result.language) for kind in kinds)
            for gid, kinds in canonical.restored_cells(result.flags, grade_ids).items()}


@dataclass
class Page:
    """What one render made: the feedback page, the autograded copy (None when the submission could not
    be read) and the notes for the grading report (the child's copy of the result is not the caller's)."""
    html: str
    autograded_copy: str | None
    notes: list[str] = field(default_factory=list)


def _scores_only(result: SubmissionResult, reason: str) -> str:
    why = t("The notebook is not shown here: {reason}. Your instructor sees it in the Formgrader.",
            result.language, reason=reason)
    resources = {"scores": scores(result), "withheld": why}
    return _exporter_for(result).from_notebook_node(_titled(nbformat.v4.new_notebook(), result), resources)[0]


def _exporter_for(result: SubmissionResult):
    """The batch's exporter, its page's ``<html lang>`` set to the submission's language (an ISO 639-1 code)."""
    exporter = _exporter()
    exporter.language_code = result.language.split("-")[0]
    return exporter


def _titled(nb, result: SubmissionResult):
    """``nb`` with the page's title: the assignment's feedback, in the student's language (never a title the
    student's notebook carried)."""
    nb.metadata["title"] = t("Feedback: {assignment}", result.language, assignment=result.assignment)
    return nb


def render_page(result: SubmissionResult, max_cells: int, seconds: float) -> Page:
    """In the page process (:mod:`page_process`): the feedback page and the autograded copy, the
    notebook's outputs made safe and bounded (:mod:`safe_html`), within ``seconds``; over them, the page
    is the scores and why, and the copy keeps no output."""
    notes: list[str] = []
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
                    annotate_grade_cells(nb, result, result.language, for_instructor=True)
                    autograded_copy = nbformat.writes(nb)  # what the Formgrader shows
                    remove_verdicts(nb, result)  # the page draws the student's own in its panels
            else:
                nb = nbformat.v4.new_notebook()
            restored = restored_notes(result, nb)
            summary = t(RESTORED_SUMMARY, result.language, count=len(restored)) if restored else ""
            body, _ = _exporter_for(result).from_notebook_node(
                _titled(nb, result), {"scores": scores(result), "verdicts": verdicts(result),
                                      "restored": restored, "restored_summary": summary,
                                      "your_run": t("your notebook's run:", result.language)})
        except safe_html.RenderBudgetExceeded as exc:
            over_budget = exc
    if over_budget is not None:  # our own short text: renders in milliseconds, outside the budget
        body = _scores_only(result, str(over_budget))
        notes.append(f"feedback page without the notebook: {over_budget}")
    return Page(body, autograded_copy, notes)


def render_scores_only(result: SubmissionResult, reason: str) -> str:
    """In the page process: the page of a submission whose render was stopped (our own short text)."""
    return _scores_only(result, reason)


def _stripped_copy(result: SubmissionResult, max_cells: int, seconds: float) -> str | None:
    """The autograded copy when its render process was killed: the canonical copy, no output kept
    (built here, in linear time, without parsing any HTML)."""
    nb = _shown_notebook(result, max_cells, [])
    if nb is None:
        return None
    _outputs_withheld(nb, seconds)
    annotate_grade_cells(nb, result, result.language, for_instructor=True)
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
            f"{html.escape(_plain_text(scores(result)))}\n\n{html.escape(reason)}</pre></body></html>")


def _plain_text(summary: dict) -> str:
    """:func:`scores` as lines of text (the last resort's page)."""
    outcome = summary["outcome"]
    lines = [f"{summary['assignment']}: {summary['score']:g} / {summary['points']:g}",
             f"{outcome['before']}{outcome['state']}{outcome['after']} {summary['detail']}"]
    if summary.get("deadline"):
        lines.append(summary["deadline"])
    for part in (summary["tests"], summary["written"]):
        if part:
            lines += ["", part["sentence"], " | ".join(part["headings"])]
            lines += [" | ".join([row["grade_id"], f"{'?' if row['score'] is None else format(row['score'], 'g')} / "
                                 f"{row['points']:g}", row["result"], row["text"]]) for row in part["rows"]]
    return "\n".join(lines)


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
    keep_record(course, result)  # release_feedback rewrites the page from it once a person grades
    return out


def _graded_code_cells(nb, result: SubmissionResult):
    for cell in nb.cells:
        graded = result.cells.get(notebooks.grade_id(cell) or "")
        if graded is not None and cell.cell_type == "code":
            yield cell, graded


def remove_verdicts(nb, result: SubmissionResult) -> None:
    """Take back the verdicts :func:`annotate_grade_cells` appended (each test cell's last output)."""
    for cell, _ in _graded_code_cells(nb, result):
        cell.outputs.pop()


def annotate_grade_cells(nb, result: SubmissionResult, language: str = "en", for_instructor: bool = False) -> None:
    """Each test cell gets the trusted verdict as its last output (the hidden ones show only their name
    in the student's copy), for the Formgrader (``for_instructor``: each finding whole, else the student's
    lines: :class:`~rlhf_course.grading.results.CellResult`): it says why a test scored 0."""
    for cell, graded in _graded_code_cells(nb, result):
        verdict = t("passed" if graded.score == graded.points else "FAILED", language)
        message = graded.instructor_message if for_instructor else graded.message
        text = (f"[{t('trusted grader', language)}] {verdict} ({graded.score:g} / {graded.points:g}): "
                f"{printable(message)}\n")
        cell.outputs.append(nbformat.v4.new_output("stream", name="stdout", text=text))
