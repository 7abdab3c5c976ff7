"""A student in a JupyterLab of their own (headless Chromium), the course's exchange configured as a JupyterHub admin
would: the Assignment List panel fetches the released assignment, Validate passes on the completed notebook, Submit
reaches the exchange.

One test, one lab (fetching and validating were a test of their own, which started a second lab to repeat them).  The
reference answers alone pass Validate in the hub's lab too (tests/classroom/test_course_on_jupyterhub.py, Alice) and in
nbgrader validate (tests/test_release.py); the instructor's side and the feedback fetched in the lab are the hub
test's."""

import pytest

from rlhf_course import ASSIGNMENT, NOTEBOOK
from rlhf_course.grading import examples, notebooks, release
from tests.support import solutions
from tests.support.course import copy_course, release_course

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
    server = LabServer(home, tmp_path, env_extra={"HOME": str(home)})
    yield server, home
    server.stop()


@pytest.mark.slow
def test_fetch_validate_and_submit_in_the_lab(student_lab, browser, artifacts, repo, tmp_path):
    """The student's side in a JupyterLab of their own: fetch from the Assignment List; complete (the reference
    answers and Part 4's model written answers, with a correct `dpo_loss` that emits a torch-style warning); Validate
    says success, as grading will; Submit reaches the exchange with those answers.  What follows (collect, trusted
    grading, feedback released, fetched and read in the lab) is the hub test's (tests/classroom/, two students) and the
    exchange test's (tests/exchange/, nbgrader's commands as separate users)."""
    import time

    import nbformat

    server, home = student_lab
    page = browser.new_page(viewport={"width": 1400, "height": 900})

    def assignment_list(reload: bool = True):
        if reload:
            page.goto(server.url("lab"))
        page.get_by_role("menuitem", name="Nbgrader", exact=True).click()
        page.get_by_role("menuitem", name="Assignment List", exact=True).click()

    assignment_list()
    fetch = page.get_by_role("button", name="Fetch")
    fetch.wait_for(timeout=60_000)
    page.screenshot(path=str(artifacts / "assignment_list_before_fetch.png"))
    fetch.click()
    page.get_by_role("button", name="Submit").wait_for(timeout=60_000)
    page.screenshot(path=str(artifacts / "assignment_list_after_fetch.png"))
    fetched = home / ASSIGNMENT / NOTEBOOK
    assert fetched.is_file()
    source = notebooks.read(repo / "source" / ASSIGNMENT / NOTEBOOK)
    answers = {**examples.answers_for(repo, ()), **solutions.written_solutions(source)}
    answers["dpo_answer"] = answers["dpo_answer"].replace("def dpo_loss(", "import warnings\n\ndef dpo_loss(", 1).replace(
        '    """\n', '    """\n    warnings.warn("a torch-style UserWarning from a correct answer")\n', 1)
    nbformat.write(notebooks.fill_answers(notebooks.read(fetched), answers), str(fetched))

    page.goto(server.url(f"lab/tree/{ASSIGNMENT}/{NOTEBOOK}"))
    page.locator(".jp-Notebook").wait_for(timeout=60_000)
    page.get_by_role("button", name="Validate").first.click()
    page.locator(".jp-Dialog").get_by_text("Success! Your notebook passes all the tests.").wait_for(timeout=120_000)
    page.screenshot(path=str(artifacts / "validate_success_with_a_warning.png"))

    page.keyboard.press("Escape")  # the dialog
    assignment_list(reload=False)  # it lists the fetched assignment, as when it opened
    page.get_by_role("button", name="Submit").click(timeout=60_000)
    inbound = tmp_path / "exchange" / COURSE_ID / "inbound"
    deadline = time.time() + 60
    while not (inbound.is_dir() and any(inbound.iterdir())):
        assert time.time() < deadline, "the submission never reached the exchange"
        time.sleep(0.5)
    page.screenshot(path=str(artifacts / "assignment_list_submitted.png"))
    [entry] = list(inbound.iterdir())
    submitted = notebooks.cells_by_grade_id(notebooks.read(entry / NOTEBOOK))
    assert "a torch-style UserWarning from a correct answer" in submitted["dpo_answer"].source
