"""A real JupyterLab server on a free port and Debian's Chromium, as the browser tests drive them."""
import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

CHECKOUT = Path(__file__).resolve().parents[2]

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_FLAGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                  "--disable-component-update", "--no-first-run", "--disable-sync", "--disable-quic"]
ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts" / "browser"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def write_settings(settings: Path, quiet_news: bool = True) -> None:
    """User settings for the test's JupyterLab: render every cell (no virtual windowing, so the
    test can reach any output) and, unless the test is about it, do not ask about news."""
    values = {"@jupyterlab/notebook-extension/tracker": {"windowingMode": "none"}}
    if quiet_news:
        values["@jupyterlab/apputils-extension/notification"] = {"fetchNews": "false"}
    for plugin, value in values.items():
        path = settings / (plugin + ".jupyterlab-settings")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(value))


class LabServer:
    """`jupyter lab` on `root`, or, with `make_target`, the Makefile's own target (`make lab`), whose
    port, token and quiet start come from a jupyter_server_config.json in this server's config dir."""

    def __init__(self, root: Path, scratch: Path, env_extra: dict | None = None, make_target: str | None = None,
                 quiet_news: bool = True, disabled_extensions: tuple[str, ...] = (), wait: bool = True,
                 make_args: tuple[str, ...] = ()):
        """Started, and answering unless ``wait`` is false (then :meth:`wait_ready` before use: servers started
        together start side by side).  ``make_args``: more of make's arguments (variables, options)."""
        self.port, self.token, self.scratch = free_port(), "rlhf-course-test", scratch
        settings = scratch / "lab-settings"
        write_settings(settings, quiet_news)
        config = scratch / "config"
        if disabled_extensions:  # JupyterLab's page config, in this server's own config dir
            (config / "labconfig").mkdir(parents=True, exist_ok=True)
            (config / "labconfig" / "page_config.json").write_text(
                json.dumps({"disabledExtensions": {name: True for name in disabled_extensions}}))
        env = dict(os.environ, JUPYTER_CONFIG_DIR=str(config), JUPYTER_RUNTIME_DIR=str(scratch / "runtime"),
                   JUPYTERLAB_WORKSPACES_DIR=str(scratch / "workspaces"), JUPYTERLAB_SETTINGS_DIR=str(settings),
                   **(env_extra or {}))
        # the server runs this checkout's package, whichever checkout the environment was installed from
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [env.get("PYTHONPATH"), str(CHECKOUT)]))
        env.pop("MPLBACKEND", None)
        self.log = open(scratch / "jupyterlab.log", "w")
        if make_target:
            config.mkdir(parents=True, exist_ok=True)
            (config / "jupyter_server_config.json").write_text(json.dumps({
                "ServerApp": {"port": self.port, "ip": "127.0.0.1", "open_browser": False, "allow_root": True},
                "IdentityProvider": {"token": self.token},
                "LabApp": {"news_url": None, "check_for_updates_class": "jupyterlab.NeverCheckForUpdate"}}))
            command = ["make", "--no-print-directory", "-C", str(root), *make_args, make_target]
        else:
            command = [sys.executable, "-m", "jupyterlab", "--no-browser", "--allow-root", f"--port={self.port}",
                       "--ip=127.0.0.1", f"--IdentityProvider.token={self.token}", f"--ServerApp.root_dir={root}",
                       "--LabApp.news_url=", "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate"]
        self.process = subprocess.Popen(command, cwd=root, env=env, stdout=self.log, stderr=subprocess.STDOUT,
                                        start_new_session=True)
        if wait:
            self.wait_ready()

    def wait_ready(self, timeout: float = 60) -> None:
        deadline = time.time() + timeout
        while time.time() < deadline:
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{self.port}/api/status?token={self.token}", timeout=2)
                return
            except OSError:
                time.sleep(0.1)  # a refused connection costs nothing: each start's wait ends sooner
        raise RuntimeError("JupyterLab did not start")

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}/{path}?token={self.token}"

    def _api(self, path: str, body: dict | None = None, timeout: float = 30):
        """A call of Jupyter Server's REST API with the token: GET, or POST of ``body``."""
        request = urllib.request.Request(
            f"http://127.0.0.1:{self.port}/api/{path}", data=None if body is None else json.dumps(body).encode(),
            method="GET" if body is None else "POST",
            headers={"Authorization": f"token {self.token}", "Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return json.loads(response.read())

    def start_kernel_for(self, notebook: str) -> str:
        """Start the notebook's kernel session through the REST API, before a page opens it.  Opened
        cold under load, JupyterLab 4 sometimes started two kernels for the notebook and shut the first
        down under the page (seen in CI: the page's widgets then never rendered); a page that finds
        the session already there just connects to its kernel.  Returns the kernel id."""
        session = self._api("sessions", {"path": notebook, "type": "notebook", "name": notebook,
                                         "kernel": {"name": "python3"}}, timeout=120)
        return session["kernel"]["id"]

    def kernels(self) -> list[dict]:
        """The server's kernels (id, execution_state, connections, ...)."""
        return self._api("kernels")

    def kernel_ids(self) -> list[str]:
        return [kernel["id"] for kernel in self.kernels()]

    def restart_kernel(self, kernel: str) -> None:
        self._api(f"kernels/{kernel}/restart", {}, timeout=120)

    def stop(self) -> None:
        os.killpg(self.process.pid, 15)
        self.process.wait(timeout=20)
        self.log.close()


class InstructorServers:
    """The instructor's Jupyter server on a course folder (its ``instructor/`` importable), started the first time
    a test asks for that folder and shared by the next ones; :meth:`stop` stops them all."""

    def __init__(self, scratch: Path):
        self.scratch, self.servers = scratch, {}

    def start(self, course: Path, wait: bool = True) -> LabServer:
        """The course's server, answering; ``wait=False``: started, not waited for (the next ``start`` of the
        course waits), so that it starts while the test does other things."""
        if course not in self.servers:
            scratch = self.scratch / f"server{len(self.servers)}"
            scratch.mkdir()
            self.servers[course] = LabServer(course, scratch, wait=False,
                                             env_extra={"PYTHONPATH": f"{course / 'instructor'}:{course}"})
        if wait:
            self.servers[course].wait_ready()
        return self.servers[course]

    def stop(self) -> None:
        for server in self.servers.values():
            server.stop()


# What JupyterLab's Nbgrader menu offers: the lab and the hub tests read it the same way.
INSTRUCTOR_ONLY = ("Formgrader", "Course List", "Create Assignment")


def nbgrader_menu_items(page) -> list[str]:
    page.get_by_role("menuitem", name="Nbgrader", exact=True).click()
    menu = page.locator(".lm-Menu").last
    menu.wait_for(timeout=10_000)
    items = [t.strip() for t in menu.locator(".lm-Menu-itemLabel").all_inner_texts()]
    return items


def offered(names, texts) -> list[str]:
    """The names (any case) that appear among the texts: nbgrader writes "Create assignment" too."""
    joined = "\n".join(texts).lower()
    return [name for name in names if name.lower() in joined]


def wait_for_dom(page, predicate: str, arg=None, timeout: float = 30_000) -> None:
    """Wait until ``predicate(arg)``, a JavaScript function of the page's DOM, is true: tested once, then each time
    the DOM changes (a MutationObserver).  Playwright's ``wait_for_function`` tests on every animation frame, which
    keeps Chromium drawing frames as long as the wait lasts (a JupyterLab page while a notebook runs: seconds of
    CPU).  Raises playwright's Error, naming the predicate, if it is still false after ``timeout`` ms."""
    page.evaluate(f"""arg => new Promise((resolve, reject) => {{
        const predicate = {predicate};
        const holds = () => {{ try {{ return !!predicate(arg); }} catch (error) {{ return false; }} }};
        if (holds()) return resolve(true);
        const observer = new MutationObserver(() => {{
            if (holds()) {{ observer.disconnect(); clearTimeout(timer); resolve(true); }}
        }});
        const timer = setTimeout(() => {{
            observer.disconnect();
            reject(new Error("still false after {timeout:g} ms: " + {json.dumps(predicate[:300])}));
        }}, {timeout});
        observer.observe(document, {{subtree: true, childList: true, attributes: true, characterData: true}});
    }})""", arg)


def offline_page(browser, viewport: dict):
    """A new page that may open local files only: every request to another host is refused and its address
    noted in the list returned beside it (a self-contained page asks for none).  Close ``page.context`` after."""
    asked: list[str] = []
    page = browser.new_context(viewport=viewport).new_page()

    def refuse_other_hosts(route):
        if not route.request.url.startswith("file://"):
            asked.append(route.request.url)
            return route.abort()
        return route.continue_()
    page.route("**/*", refuse_other_hosts)
    return page, asked
