"""A released notebook, opened in JupyterLab and left untouched, is not marked as changed: the kernel's connection
writes its ``language_info`` (and kernelspec) into the notebook's metadata, which the course's extension does not
count as the student's change.  What the student does change keeps its mark, through a restart of the kernel."""
import json
import shutil

from rlhf_course import ASSIGNMENT, NOTEBOOK
from tests.support.browser import LabServer, wait_for_dom

# The status bar's kernel status: "Idle" only once the page is connected to its kernel and has heard from it.
KERNEL_IDLE = ("() => [...document.querySelectorAll('.jp-StatusBar-TextItem')]"
               ".some(e => /\\| Idle$/.test(e.textContent.trim()))")
TYPED = "# typed by the student"
# The notebook's model holds the language_info the kernel's info reply wrote (the release's has only the name):
# read through the application JupyterLab exposes when asked (LabApp.expose_app_in_browser).
KERNEL_WROTE = ("() => { const model = window.jupyterapp.shell.currentWidget.context.model;"
                " return (model.getMetadata('language_info') || {}).version !== undefined; }")


def notebook_tab(page):
    return page.locator(".lm-DockPanel-tabBar .lm-TabBar-tab", has_text=NOTEBOOK)


def is_dirty(page) -> bool:
    return "jp-mod-dirty" in (notebook_tab(page).get_attribute("class") or "")


def wait_until_idle(page) -> None:
    """The kernel is idle and its language_info is in the notebook's model (the write that marked it dirty)."""
    wait_for_dom(page, KERNEL_IDLE, timeout=60_000)
    page.wait_for_function(KERNEL_WROTE, polling=200, timeout=30_000)


def test_an_untouched_notebook_stays_clean_and_a_changed_one_stays_dirty(tmp_path, browser, repo, artifacts):
    workdir = tmp_path / "student"
    (workdir / ASSIGNMENT).mkdir(parents=True)
    shutil.copy2(repo / "release" / ASSIGNMENT / NOTEBOOK, workdir / ASSIGNMENT / NOTEBOOK)
    released = json.loads((workdir / ASSIGNMENT / NOTEBOOK).read_text())["metadata"]["language_info"]
    assert "version" not in released, "the release's language_info already says what the kernel writes"
    scratch = tmp_path / "server"
    (scratch / "config").mkdir(parents=True)
    (scratch / "config" / "jupyter_server_config.json").write_text(
        json.dumps({"LabApp": {"expose_app_in_browser": True}}))
    server = LabServer(workdir, scratch, disabled_extensions=("@jupyterlab/mathjax-extension",))
    try:
        path = f"{ASSIGNMENT}/{NOTEBOOK}"
        server.start_kernel_for(path)
        page = browser.new_page(viewport={"width": 1400, "height": 900})
        page.goto(server.url(f"lab/workspaces/clean-open/tree/{path}"))
        notebook = page.locator(".jp-NotebookPanel .jp-Notebook")
        notebook.wait_for(timeout=60_000)
        wait_until_idle(page)
        page.screenshot(path=str(artifacts / "clean_open_untouched.png"))
        assert not is_dirty(page), "the untouched notebook's tab shows unsaved changes"

        cell = page.locator(".jp-CodeCell", has_text="raise NotImplementedError").first
        cell.locator(".cm-content").click()
        page.keyboard.insert_text(TYPED)
        wait_for_dom(page, "() => document.querySelector('.lm-DockPanel-tabBar .lm-TabBar-tab.jp-mod-dirty')",
                     timeout=10_000)
        # as Kernel > Restart Kernel does, past its dialog: the page has seen the restart when this returns
        page.evaluate("() => window.jupyterapp.shell.currentWidget.sessionContext.restartKernel()")
        wait_until_idle(page)
        page.screenshot(path=str(artifacts / "clean_open_typed_restarted.png"))
        assert is_dirty(page), "the student's typing lost its unsaved-changes mark when the kernel restarted"
        assert TYPED not in (workdir / ASSIGNMENT / NOTEBOOK).read_text()
    finally:
        server.stop()
