"""A student in a JupyterLab of their own (headless Chromium), the course's exchange configured as a JupyterHub admin
would: the Assignment List panel shows the due date the exchange holds (the course's lab extension) and fetches the
released assignment, Validate passes on the completed notebook, Submit reaches the exchange and, the due date having
passed, the list says how late it is.  With both language editions fetched, the list says under one's Submit that it
replaces the other's newer submission, refuses a notebook Jupyter cannot read with the course's sentence (not a
traceback), the two notebooks' tabs (one file name) show their folders, and Validate of the Chinese one speaks Chinese
(the course's headings, nbgrader's dialog lines).

The student's loop, both editions, is one test on one lab: a lab's start and first load cost more than any of the
loop's steps.  The reference answers alone pass Validate in the hub's lab too (tests/classroom/test_course_on_jupyterhub.py, Alice) and in
nbgrader validate (tests/test_release.py); the instructor's side and the feedback fetched in the lab are the hub
test's."""

import datetime as dt
import re

import pytest

from rlhf_course import ASSIGNMENT, NOTEBOOK
from rlhf_course.classroom import patient_validate
from rlhf_course.i18n import ZH
from rlhf_course.grading import examples, release
from rlhf_course.course import notebooks
from tests.support import solutions
from tests.support.course import copy_course, release_course, repo_course

from rlhf_course.grading import deadlines
from rlhf_course.course.settings import Course
from tests.support.browser import LabServer

COURSE_ID = "rlhf-course"


@pytest.fixture
def student_lab(tmp_path, repo, monkeypatch):
    exchange = tmp_path / "exchange"
    monkeypatch.setenv("RLHF_EXCHANGE_ROOT", str(exchange))
    course = copy_course(tmp_path / "course")
    release_course(course)
    release.nbgrader(course, "release_assignment", ASSIGNMENT)
    home = tmp_path / "student"
    home.mkdir()
    config = tmp_path / "config"  # the server's JUPYTER_CONFIG_DIR: as a JupyterHub admin would set it
    config.mkdir()
    (config / "nbgrader_config.py").write_text(
        f"from rlhf_course import exchange\nexchange.configure(get_config(), {str(exchange)!r}, {COURSE_ID!r})\n")
    # JupyterLab's MathJax off: the fetched notebook's hundreds of formulas, typeset, are seconds of Chromium's CPU
    # for what no assertion here reads (the math's rendering is the Formgrader's and feedback tests').
    server = LabServer(home, tmp_path, env_extra={"HOME": str(home)}, disabled_extensions=("@jupyterlab/mathjax-extension",))
    yield server, home, course
    server.stop()


@pytest.mark.slow
def test_fetch_validate_and_submit_in_the_lab_then_the_other_edition(student_lab, browser, artifacts, repo, tmp_path):
    """The student's side in a JupyterLab of their own: fetch from the Assignment List; complete (the reference
    answers and Part 4's model written answers, with a correct `dpo_loss` that emits a torch-style warning); Validate
    says success, as grading will.  The Chinese edition is released and fetched too: nothing submitted yet, nothing
    is said to be replaced; Submit of the English one, its due date passed, reaches the exchange with those answers
    and the list says how late it is, and its Fetch Feedback, none released yet, says so in a dialog (not silence);
    the Chinese one's Submit says first that it would replace it (the sentence
    `nbgrader submit` warns with, the lab's language); a notebook Jupyter cannot read is refused with the course's
    sentence; both notebooks open, their tabs show their folders (one file name in both).  What follows (collect, trusted grading, feedback released, fetched and read in the lab) is the hub
    test's (tests/classroom/, two students) and the exchange test's (tests/exchange/, nbgrader's commands as separate
    users)."""
    import time

    import nbformat

    server, home, course = student_lab
    page = browser.new_page(viewport={"width": 1400, "height": 900})

    def assignment_list(reload: bool = True):
        if reload:
            page.goto(server.url("lab"))
        page.get_by_role("menuitem", name="Nbgrader", exact=True).click()
        page.get_by_role("menuitem", name="Assignment List", exact=True).click()

    def row(listed: str, edition: str):
        return page.locator(f"#{listed}_assignments_list > .list_item").filter(
            has=page.locator(".item_name > :first-child", has_text=re.compile(rf"^{edition}$")))

    assignment_list()
    fetch = page.get_by_role("button", name="Fetch")
    fetch.wait_for(timeout=60_000)
    released = page.locator("#released_assignments_list .list_item", has_text=ASSIGNMENT)
    # the gradebook's due date (tests/conftest.py's RLHF_DUE_DATE), put in the exchange by release_assignment
    released.get_by_text("(due 2100-01-01 00:00 UTC)").wait_for(timeout=30_000)
    page.screenshot(path=str(artifacts / "assignment_list_before_fetch.png"))
    fetch.click()
    page.get_by_role("button", name="Submit").wait_for(timeout=60_000)
    page.screenshot(path=str(artifacts / "assignment_list_after_fetch.png"))
    fetched = home / ASSIGNMENT / NOTEBOOK
    assert fetched.is_file()
    source = notebooks.read(repo / "source" / ASSIGNMENT / NOTEBOOK)
    answers = {**examples.answers_for(repo_course(), ()), **solutions.written_solutions(source)}
    answers["dpo_answer"] = answers["dpo_answer"].replace("def dpo_loss(", "import warnings\n\ndef dpo_loss(", 1).replace(
        '    """\n', '    """\n    warnings.warn("a torch-style UserWarning from a correct answer")\n', 1)
    nbformat.write(notebooks.fill_answers(notebooks.read(fetched), answers), str(fetched))

    # opened as the student opens it, from the fetched assignment's notebooks in the list (no second lab load)
    page.locator("#fetched_assignments_list .assignment-notebooks-link", has_text=ASSIGNMENT).click()
    page.locator("#fetched_assignments_list .nested_list_item a",
                 has_text=NOTEBOOK.removesuffix(".ipynb")).click(timeout=30_000)
    notebook = page.locator(".jp-NotebookPanel", has=page.locator(".jp-Notebook"))
    notebook.locator(".jp-Notebook").wait_for(timeout=60_000)
    notebook.get_by_role("button", name="Validate").click()  # the notebook's own (the list has one per notebook)
    page.locator(".jp-Dialog").get_by_text("Success! Your notebook passes all the tests.").wait_for(timeout=120_000)
    page.screenshot(path=str(artifacts / "validate_success_with_a_warning.png"))
    page.keyboard.press("Escape")  # the dialog

    # The Chinese edition released and fetched too (the list shows what the exchange holds when the lab loads)
    release.nbgrader(course, "release_assignment", "rlhf_zh")
    assignment_list()
    row("released", "rlhf_zh").get_by_role("button", name="Fetch").click(timeout=60_000)
    row("fetched", "rlhf_zh").get_by_role("button", name="Submit").wait_for(timeout=60_000)
    assert page.locator(".rlhf-replaces").count() == 0  # nothing submitted: nothing to replace

    # The instructor moves the due date to 2 h 10 min ago (the gradebook, then the exchange): the student is late.
    _due_date_moved(course, dt.datetime.now(dt.timezone.utc).replace(tzinfo=None) - dt.timedelta(hours=2, minutes=10))
    row("fetched", ASSIGNMENT).get_by_role("button", name="Submit").click(timeout=60_000)
    inbound = tmp_path / "exchange" / COURSE_ID / "inbound"
    deadline = time.time() + 60
    while not (inbound.is_dir() and any(inbound.iterdir())):
        assert time.time() < deadline, "the submission never reached the exchange"
        time.sleep(0.5)
    late = page.locator("#submitted_assignments_list .rlhf-deadline-late")
    late.wait_for(timeout=30_000)
    assert re.fullmatch(r" \(late by 2 h 10 min: the late penalty applies\)", late.inner_text()), late.inner_text()
    row("fetched", ASSIGNMENT).get_by_text("(due ").wait_for()
    note = row("fetched", "rlhf_zh").locator(".rlhf-replaces")
    note.wait_for(timeout=60_000)
    assert re.fullmatch(r"This replaces your rlhf submission of \d{4}-\d\d-\d\d \d\d:\d\d UTC \(and any manual "
                        r"grade on it\): only the latest submission of either edition is graded\.",
                        note.inner_text()), note.inner_text()
    assert row("fetched", ASSIGNMENT).locator(".rlhf-replaces").count() == 0
    page.screenshot(path=str(artifacts / "assignment_list_submitted.png"))
    page.screenshot(path=str(artifacts / "assignment_list_submit_replaces.png"))
    # (docs/images/assignment_list_deadline_en.png is one of these, committed by hand)
    page.locator("#assignments").first.screenshot(path=str(artifacts / "assignment_list_deadline_en.png"))
    [entry] = list(inbound.iterdir())
    submitted = notebooks.cells_by_grade_id(notebooks.read(entry / NOTEBOOK))
    assert "a torch-style UserWarning from a correct answer" in submitted["dpo_answer"].source

    # Fetch Feedback before the instructor has released any: a dialog says so, in the edition's language, and that
    # the submission is kept (nbgrader's own shows nothing: tests/exchange/test_feedback_notice.py)
    page.locator("#submitted_assignments_list").get_by_role("button", name="Fetch Feedback").click()
    notice = page.locator(".jp-Dialog", has_text="No feedback for rlhf yet")
    notice.wait_for(timeout=60_000)
    assert notice.locator(".jp-Dialog-header").inner_text().strip() == f"Feedback for {ASSIGNMENT}"
    said = notice.locator(".jp-Dialog-body").inner_text()
    assert re.fullmatch(r"No feedback for rlhf yet: your instructor releases it after grading; your submission of "
                        r"\d{4}-\d\d-\d\d \d\d:\d\d UTC is kept\.", said), said
    page.screenshot(path=str(artifacts / "assignment_list_no_feedback_yet.png"))
    page.keyboard.press("Escape")
    notice.wait_for(state="hidden")
    page.locator("#submitted_assignments_list").get_by_role("button", name="Fetch Feedback").wait_for(timeout=30_000)
    assert sorted(p.name for p in inbound.iterdir()) == [entry.name]  # nothing of the submission changed

    # a notebook Jupyter cannot read is refused: the dialog shows the course's sentence in the edition's language,
    # every line whole inside it, not the server's traceback (tests/exchange/test_unreadable_submission.py)
    fetched_zh = home / "rlhf_zh" / NOTEBOOK
    kept = fetched_zh.read_bytes()
    fetched_zh.write_text('{"cells": [{"cell_type": "code", "source": "x = 1"')
    row("fetched", "rlhf_zh").get_by_role("button", name="Submit").click()
    refusal = page.locator(".jp-Dialog #submission-message pre")
    refusal.wait_for(timeout=60_000)
    said = refusal.inner_text()
    assert said.startswith(f"{NOTEBOOK} 未提交：Jupyter 无法读取它") and "Traceback" not in said, said
    assert "Revert Notebook to Checkpoint" in said
    assert refusal.evaluate("pre => pre.scrollWidth <= pre.clientWidth"), said  # no line cut at the right edge
    page.screenshot(path=str(artifacts / "assignment_list_unreadable_refused_zh.png"))
    page.keyboard.press("Escape")
    refusal.wait_for(state="hidden")
    fetched_zh.write_bytes(kept)

    for edition in (ASSIGNMENT, "rlhf_zh"):
        page.locator(".lm-TabBar-tab", has_text="Assignments").click()  # back from the notebook opened before
        row("fetched", edition).locator(".assignment-notebooks-link").click()
        row("fetched", edition).locator(".nested_list_item a", has_text=NOTEBOOK.removesuffix(".ipynb")).click(
            timeout=30_000)
    # the second notebook opens, then each tab shows its folder (one file name in both), and no file was renamed
    tabs = page.locator(".lm-DockPanel-tabBar .lm-TabBar-tab")
    tabs.filter(has_text=NOTEBOOK).nth(1).wait_for(timeout=120_000)
    for edition in (ASSIGNMENT, "rlhf_zh"):
        label = page.locator(f".lm-TabBar-tab[data-rlhffolder='{edition}'] > .lm-TabBar-tabLabel")
        label.wait_for(timeout=30_000)
        assert label.evaluate("label => getComputedStyle(label, '::before').content") == f'"{edition}/"'
    page.screenshot(path=str(artifacts / "two_editions_tabs.png"))
    assert tabs.locator(".lm-TabBar-tabLabel").all_inner_texts().count(NOTEBOOK) == 2
    assert sorted(p.relative_to(home).as_posix() for p in home.glob("*/*.ipynb")) == [
        f"{ASSIGNMENT}/{NOTEBOOK}", f"rlhf_zh/{NOTEBOOK}"]

    # Validate (the list's button: the file as on disk) of the Chinese copy with a locked cell deleted and an answer
    # cell's metadata edited: above each of the course's notices, the course's heading in the edition's language, not
    # nbgrader's "The source of the following cell has changed" (false of both)
    release_zh = notebooks.read(tmp_path / "exchange" / COURSE_ID / "outbound" / "rlhf_zh" / NOTEBOOK)
    changed = notebooks.read(fetched_zh)
    changed.cells.remove(notebooks.cells_by_grade_id(changed)["dpo_gradient"])
    notebooks.cells_by_grade_id(changed)["ppo_answer"].metadata.nbgrader["locked"] = True
    nbformat.write(changed, str(fetched_zh))
    headings = patient_validate.restored_cell_headings(changed, release_zh, "zh-CN")
    assert len(headings) == 2 and all(h.startswith("评分时将采用") for h in headings)
    page.locator(".lm-TabBar-tab", has_text="Assignments").click()
    row("fetched", "rlhf_zh").locator(".nested_list_item").get_by_role("button", name="Validate").click()
    lines = page.locator(".jp-Dialog #validation-message.validation-changed > div > p")
    lines.first.wait_for(timeout=120_000)
    page.locator(".jp-Dialog", has_text=headings[0]).wait_for(timeout=10_000)
    assert lines.all_inner_texts() == headings
    assert "should not have" not in page.locator(".jp-Dialog").inner_text()
    notices = page.locator(".jp-Dialog #validation-message pre")
    assert notices.count() == 2 and all(notices.nth(i).evaluate("pre => pre.scrollWidth <= pre.clientWidth")
                                        for i in range(2))  # wrapped inside the dialog, no line cut at its edge
    page.screenshot(path=str(artifacts / "validate_cells_taken_from_the_release_zh.png"))
    page.keyboard.press("Escape")
    fetched_zh.write_bytes(kept)

    # Validate of the Chinese copy as fetched, nothing answered: nbgrader's dialog title and the line above each failed
    # cell in the edition's language (sent by the course's server, put in place by its labextension), and under each
    # written answer's stub nbgrader's "You did not provide a response." in Chinese too
    page.locator(".jp-Dialog").wait_for(state="detached")
    row("fetched", "rlhf_zh").locator(".nested_list_item").get_by_role("button", name="Validate").click()
    dialog = page.locator(".jp-Dialog", has=page.locator("#validation-message.validation-failed"))
    dialog.wait_for(timeout=120_000)
    dialog.locator(".jp-Dialog-header", has_text=ZH["Validation Results"]).wait_for(timeout=10_000)
    lines = dialog.locator("#validation-message > div > p")
    assert lines.count() >= 4 and set(lines.all_inner_texts()) == {ZH["The following cell failed:"]}
    said = dialog.inner_text()
    unanswered = "".join(ZH[patient_validate.NO_RESPONSE].split())  # wrapped to the lines nbgrader validate prints
    assert "".join(said.split()).count(unanswered) == 3  # the three written answers' stubs
    assert not [english for english in ("Validation Results", "The following cell failed", "You did not provide")
                if english in said], said[:300]
    page.screenshot(path=str(artifacts / "validate_nothing_answered_zh.png"))
    page.keyboard.press("Escape")


def _due_date_moved(course, due: dt.datetime) -> None:
    """What an instructor does in the Formgrader, then `python -m rlhf_course.grading publish-deadlines`."""
    from nbgrader.api import Gradebook
    configured = Course.at(course)
    with Gradebook(configured.db_url) as gb:
        gb.update_or_create_assignment(ASSIGNMENT, duedate=due)
    deadlines.publish_for(configured)
