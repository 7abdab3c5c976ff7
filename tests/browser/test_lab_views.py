"""`make lab` and `make lab-instructor`, as started by the Makefile, in headless Chromium: students
see nbgrader's student plugins only and no news prompt; instructors keep the Formgrader."""

import sys
import time
from pathlib import Path

import pytest

from tests.support.browser import INSTRUCTOR_ONLY, LabServer, nbgrader_menu_items, offered

NEWS = "Jupyter news"
NEWS_WAIT = 2  # seconds


TARGETS = ("lab", "lab-instructor")
VENV = Path(sys.executable).parent.parent


@pytest.fixture(scope="module")
def labs(tmp_path_factory, repo):
    """`make lab` and `make lab-instructor`, started side by side for the file (each waits seconds for its server:
    the two waits overlap), each in its own scratch folder."""
    servers = {}
    try:
        for target in TARGETS:
            scratch = tmp_path_factory.mktemp(target)
            (scratch / "exchange").mkdir()
            # the Formgrader's gradebook, if anything opens it, stays out of the checkout
            env = {"RLHF_GRADEBOOK_URL": f"sqlite:///{scratch / 'gradebook.db'}",
                   "RLHF_EXCHANGE_ROOT": str(scratch / "exchange")}
            # this test run's environment, never rebuilt by make (-o), even in a checkout newer than its stamp
            servers[target] = LabServer(repo, scratch, env_extra=env, make_target=target, quiet_news=False,
                                        wait=False, make_args=(f"VENV={VENV}", "-o", str(VENV / ".installed-stamp")))
        for server in servers.values():
            server.wait_ready()
        yield servers
    finally:
        for server in servers.values():
            server.stop()


def open_lab(browser, server: LabServer):
    page = browser.new_page(viewport={"width": 1400, "height": 900})
    page.goto(server.url("lab"))
    page.get_by_role("menuitem", name="Nbgrader", exact=True).wait_for(timeout=60_000)
    page.locator(".jp-LabShell").wait_for(timeout=60_000)
    return page


def palette_text(page, screenshot) -> str:
    """Every command the command palette offers (Ctrl+Shift+C), as lower-case text."""
    palette = page.locator(".jp-ModalCommandPalette .lm-CommandPalette")
    # on a busy machine (the other test worker) the lab can still be drawing its launcher: let it finish
    page.locator(".jp-LauncherCard").first.wait_for(timeout=60_000)
    for attempt in range(4):
        page.keyboard.press("Escape")
        page.locator(".jp-LabShell").click(position={"x": 700, "y": 400})
        if attempt % 2 == 0:  # a shortcut pressed while a menu or a toast still has the focus can be lost
            page.keyboard.press("Control+Shift+C")
        else:  # so every other try goes through the View menu, as a mouse user would
            page.get_by_role("menuitem", name="View", exact=True).click()
            page.get_by_role("menuitem", name="Activate Command Palette").click()
        try:
            palette.wait_for(timeout=20_000)
            break
        except Exception:
            continue
    text = palette.inner_text()
    page.screenshot(path=str(screenshot))
    page.keyboard.press("Escape")
    assert "new console" in text.lower(), text  # the palette was really read
    return text.lower()


def news_prompt_visible(page, wait_ms: int) -> bool:
    try:
        page.get_by_text(NEWS).first.wait_for(timeout=wait_ms)
        return True
    except Exception:
        return False


@pytest.mark.slow
def test_students_lab_has_no_instructor_tools_and_no_news(labs, browser, artifacts):
    server = labs["lab"]
    page = open_lab(browser, server)
    # The setting the page's lab reads (the student labconfig's override), rather than a long wait for a prompt
    # that does not come; the instructors' lab below shows the prompt within seconds with the default.
    notification = page.request.get(server.url("lab/api/settings/@jupyterlab/apputils-extension:notification")).json()
    default = notification["schema"]["properties"]["fetchNews"]["default"]  # the labconfig's override of it
    assert (notification.get("settings") or {}).get("fetchNews", default) == "false", notification.get("settings")
    opened = time.monotonic()
    page.screenshot(path=str(artifacts / "student_lab.png"))
    items = nbgrader_menu_items(page)
    page.screenshot(path=str(artifacts / "student_lab_nbgrader_menu.png"))
    page.keyboard.press("Escape")
    assert "Assignment List" in items, items
    assert not offered(INSTRUCTOR_ONLY, items), items
    assert not offered(INSTRUCTOR_ONLY, [palette_text(page, artifacts / "student_lab_palette.png")])
    assert not page.get_by_text("Create Assignment").count()  # no right-sidebar panel either
    # No news prompt in the lab's first NEWS_WAIT seconds at least: the menu and palette checks above took most
    # of them, waited here only if they did not (the instructors' lab below shows the prompt within seconds).
    left_ms = NEWS_WAIT * 1000 - (time.monotonic() - opened) * 1000
    assert not news_prompt_visible(page, max(left_ms, 1)), "the news prompt greets the student"  # 0: no timeout


@pytest.mark.slow
def test_instructors_lab_keeps_the_formgrader(labs, browser, artifacts):
    page = open_lab(browser, labs["lab-instructor"])
    # the control for the student test: without the students' config the prompt does appear
    assert news_prompt_visible(page, 30_000)
    items = nbgrader_menu_items(page)
    page.screenshot(path=str(artifacts / "instructor_lab_nbgrader_menu.png"))
    assert offered(INSTRUCTOR_ONLY, items) == list(INSTRUCTOR_ONLY), items  # the control for the student's menu
    page.keyboard.press("Escape")
    assert "formgrader" in palette_text(page, artifacts / "instructor_lab_palette.png")
    page.get_by_role("menuitem", name="Nbgrader", exact=True).click()
    page.get_by_role("menuitem", name="Formgrader", exact=True).click()
    frame = page.frame_locator("iframe").first
    frame.get_by_text("Manage Assignments").first.wait_for(timeout=60_000)
    page.screenshot(path=str(artifacts / "instructor_lab_formgrader.png"))
