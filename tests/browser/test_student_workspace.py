"""`make lab`, as the Makefile starts it in a course folder, driven in headless Chromium: the Assignment List lists the
course's assignments from the first screen (make lab released them into the course's own exchange), Fetch writes into
the folder the lab shows (student/), the answers typed in the notebook there are what Validate checks, what Submit
sends, what `nbgrader collect` collects and what grading scores."""
import json
import shutil
import sys
import time
from pathlib import Path

import pytest

from rlhf_course import ASSIGNMENT, NOTEBOOK, STUDENT_FUNCTIONS, i18n
from rlhf_course.exchange.local import NOTHING_RELEASED, STUDENT_FOLDER
from rlhf_course.grading import examples, release
from rlhf_course.course import notebooks
from rlhf_course.course.settings import Course
from tests.support import solutions
from tests.support.browser import LabServer
from tests.support.course import REPO, copy_course, gradebook_url, release_course, repo_course
from tests.support.in_process_sandbox import grade_in_process

COURSE_ID = "rlhf-course"
TYPED = "# typed in the lab by the student"
EXTENSION = REPO / "jupyter" / "labextension" / "rlhf-course-deadlines"


def make_lab(course: Path, scratch: Path) -> LabServer:
    """`make lab` in ``course`` with this checkout's environment (VENV), which is never rebuilt here (-o: the
    environment is the test run's own, whatever the mtimes of the course's copies of its inputs); the student's data
    folder (nbgrader's record of their submissions) is the test's own."""
    shutil.copy2(REPO / "Makefile", course / "Makefile")
    venv = Path(sys.executable).parent.parent
    # the course's lab extension as this checkout builds it (the environment's copy is the one it was made with)
    (scratch / "share" / "labextensions").mkdir(parents=True)
    (scratch / "share" / "labextensions" / EXTENSION.name).symlink_to(EXTENSION)
    return LabServer(course, scratch, make_target="lab", disabled_extensions=("@jupyterlab/mathjax-extension",),
                     make_args=(f"VENV={venv}", "-o", str(venv / ".installed-stamp")),
                     env_extra={"JUPYTER_PATH": str(scratch / "share"), "JUPYTER_DATA_DIR": str(scratch / "data")})


@pytest.mark.slow
def test_what_the_student_types_in_make_lab_is_what_is_graded(tmp_path, browser, artifacts, repo):
    course = release_course(copy_course(tmp_path / "course"))
    scratch = tmp_path / "server"
    scratch.mkdir()
    server = make_lab(course, scratch)
    try:
        page = browser.new_page(viewport={"width": 1400, "height": 900})
        page.goto(server.url("lab"))
        page.get_by_role("menuitem", name="Nbgrader", exact=True).click()
        page.get_by_role("menuitem", name="Assignment List", exact=True).click()
        released = page.locator("#released_assignments_list .list_item", has_text=ASSIGNMENT).filter(
            has=page.locator(".item_name", has_text="rlhf (")).first
        released.wait_for(timeout=60_000)
        assert not page.locator(".list_error:visible").count()
        page.screenshot(path=str(artifacts / "make_lab_first_screen.png"))
        released.get_by_role("button", name="Fetch").click()
        fetched = course / STUDENT_FOLDER / ASSIGNMENT / NOTEBOOK
        page.locator("#fetched_assignments_list .list_item", has_text=ASSIGNMENT).first.wait_for(timeout=60_000)
        assert fetched.is_file(), sorted(p.name for p in course.iterdir())
        assert not (course / ASSIGNMENT).exists()  # nothing beside the course's own folders

        # The student opens the notebook from the lab's file browser (its root is student/) and types the answers.
        page.goto(server.url(f"lab/tree/{ASSIGNMENT}/{NOTEBOOK}"))
        notebook = page.locator(".jp-NotebookPanel", has=page.locator(".jp-Notebook"))
        notebook.locator(".jp-Notebook").wait_for(timeout=60_000)
        reference = examples.answers_for(repo_course(), ())
        for name in STUDENT_FUNCTIONS:
            answer_id = next(gid for gid, text in reference.items() if f"def {name}(" in text)
            cell = notebook.locator(".jp-CodeCell", has_text=f"def {name}(").filter(
                has_text="raise NotImplementedError").first
            cell.locator(".cm-content").click()
            page.keyboard.press("Control+a")
            page.keyboard.insert_text(f"{TYPED}\n{reference[answer_id].strip()}")
        for written in solutions.written_solutions(notebooks.read(repo / "source" / ASSIGNMENT / NOTEBOOK)).values():
            stub = notebook.locator(".jp-MarkdownCell", has_text="YOUR ANSWER HERE").first
            stub.locator(".jp-RenderedMarkdown").dblclick()
            stub.locator(".cm-content").click()
            page.keyboard.press("Control+a")
            page.keyboard.insert_text(written)
            page.keyboard.press("Shift+Enter")  # rendered again, as a student leaves it
        page.keyboard.press("Control+s")
        deadline = time.time() + 30
        while TYPED not in fetched.read_text():
            assert time.time() < deadline, "the notebook was never saved"
            time.sleep(0.3)

        notebook.get_by_role("button", name="Validate").click()
        dialog = page.locator(".jp-Dialog")
        dialog.wait_for(timeout=180_000)
        page.screenshot(path=str(artifacts / "make_lab_validated.png"))
        assert "Success! Your notebook passes all the tests." in dialog.inner_text(), dialog.inner_text()
        page.keyboard.press("Escape")

        page.get_by_role("menuitem", name="Nbgrader", exact=True).click()
        page.get_by_role("menuitem", name="Assignment List", exact=True).click()
        page.locator("#fetched_assignments_list .list_item", has_text=ASSIGNMENT).first.get_by_role(
            "button", name="Submit").click(timeout=60_000)
        page.locator("#submitted_assignments_list .list_item", has_text=ASSIGNMENT).first.wait_for(timeout=60_000)
        page.screenshot(path=str(artifacts / "make_lab_submitted.png"))
    finally:
        server.stop()

    inbound = course / "exchange" / COURSE_ID / "inbound"
    [entry] = list(inbound.iterdir())
    assert TYPED in (entry / NOTEBOOK).read_text()
    release.nbgrader(course, "collect", ASSIGNMENT)
    [student] = [p.name for p in (course / "submitted").iterdir()]
    submitted = notebooks.cells_by_grade_id(notebooks.read(course / "submitted" / student / ASSIGNMENT / NOTEBOOK))
    assert all(TYPED in submitted[gid].source for gid in ("ppo_answer", "dpo_answer", "gae_answer"))
    course_handle = Course.at(course)
    grade_in_process(course_handle)
    scores = examples.cell_scores(gradebook_url(course), student)
    code_tests = {gid: s for gid, s in scores.items() if not gid.startswith("lab_question")}
    assert code_tests and all(s.score == s.max_score for s in code_tests.values()), {
        gid: (s.score, s.max_score) for gid, s in code_tests.items() if s.score < s.max_score}


@pytest.mark.slow
def test_before_anything_is_released_the_assignment_list_says_so(tmp_path, browser, artifacts):
    """`make lab` in a course nothing is released from yet (no `make release`): no exchange, and the Assignment List
    says so in the student's language instead of nbgrader's three "exchange directory does not exist" errors."""
    course = copy_course(tmp_path / "course")
    scratch = tmp_path / "server"
    scratch.mkdir()
    server = make_lab(course, scratch)
    try:
        assert not (course / "exchange").exists()
        page = browser.new_page(viewport={"width": 1400, "height": 900})
        for language, locale in ((i18n.ENGLISH, "en"), (i18n.CHINESE, "zh_CN")):
            (scratch / "lab-settings" / "@jupyterlab" / "translation-extension").mkdir(parents=True, exist_ok=True)
            (scratch / "lab-settings" / "@jupyterlab" / "translation-extension" / "plugin.jupyterlab-settings"
             ).write_text(json.dumps({"locale": locale}))
            page.goto(server.url("lab"))
            page.locator("#jp-MainMenu").wait_for(timeout=60_000)
            page.locator("#jp-MainMenu .lm-MenuBar-itemLabel", has_text="Nbgrader").click()
            page.get_by_role("menuitem", name="Assignment List", exact=True).click()
            note = page.locator("#released_assignments_list_placeholder .rlhf-nothing-released")
            note.wait_for(timeout=60_000)
            assert note.inner_text() == i18n.t(NOTHING_RELEASED, language)
            assert not page.locator(".list_error:visible").count()
            assert "Error fetching courses" not in page.locator("body").inner_text()
            page.screenshot(path=str(artifacts / f"make_lab_nothing_released_{language}.png"))
    finally:
        server.stop()
