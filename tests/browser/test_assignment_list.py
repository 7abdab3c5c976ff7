"""A student in a real JupyterLab (headless Chromium): the Assignment List panel fetches the
released assignment, and Validate passes on the completed notebook."""

import pytest

from rlhf_course import ASSIGNMENT, NOTEBOOK
from rlhf_course.grading import course as pipeline
from rlhf_course.grading import notebooks
from tests.conftest import copy_course

from .conftest import LabServer

COURSE_ID = "rlhf-course"


@pytest.fixture
def student_lab(tmp_path, repo, monkeypatch):
    exchange = tmp_path / "exchange"
    monkeypatch.setenv("RLHF_EXCHANGE_ROOT", str(exchange))
    course = copy_course(tmp_path / "course")
    pipeline.generate_release(course)
    pipeline.nbgrader(course, "release_assignment", ASSIGNMENT)
    home = tmp_path / "student"
    home.mkdir()
    config = tmp_path / "config"  # the server's JUPYTER_CONFIG_DIR: as a JupyterHub admin would set it
    config.mkdir()
    (config / "nbgrader_config.py").write_text(
        f"from rlhf_course import exchange\nexchange.configure(get_config(), {str(exchange)!r}, {COURSE_ID!r})\n")
    server = LabServer(home, tmp_path, env_extra={"HOME": str(home)})
    yield server, home
    server.stop()


@pytest.mark.slow
def test_fetch_from_assignment_list_then_validate(student_lab, browser, artifacts, repo):
    server, home = student_lab
    page = browser.new_page(viewport={"width": 1400, "height": 900})
    page.goto(server.url("lab"))
    page.get_by_role("menuitem", name="Nbgrader", exact=True).click()
    page.get_by_role("menuitem", name="Assignment List", exact=True).click()
    fetch = page.get_by_role("button", name="Fetch")
    fetch.wait_for(timeout=60_000)
    page.screenshot(path=str(artifacts / "assignment_list_before_fetch.png"))
    fetch.click()
    page.wait_for_function("[...document.querySelectorAll('button')].some(b => b.textContent.trim() === 'Submit')",
                           timeout=60_000)
    page.screenshot(path=str(artifacts / "assignment_list_after_fetch.png"))
    fetched = home / ASSIGNMENT / NOTEBOOK
    assert fetched.is_file()

    # The student completes the notebook (here: the reference answers and Part 4's model written
    # answers; Validate reports a written answer left as released), opens it and validates.
    source = notebooks.read(repo / "source" / ASSIGNMENT / NOTEBOOK)
    answers = {**pipeline.answers_for(repo, ()), **notebooks.written_solutions(source)}
    completed = notebooks.fill_answers(notebooks.read(fetched), answers)
    import nbformat
    nbformat.write(completed, str(fetched))
    page.goto(server.url(f"lab/tree/{ASSIGNMENT}/{NOTEBOOK}"))
    page.locator(".jp-Notebook").wait_for(timeout=60_000)
    page.get_by_role("button", name="Validate").first.click()
    dialog = page.locator(".jp-Dialog")
    dialog.get_by_text("Success! Your notebook passes all the tests.").wait_for(timeout=120_000)
    page.screenshot(path=str(artifacts / "validate_success.png"))
