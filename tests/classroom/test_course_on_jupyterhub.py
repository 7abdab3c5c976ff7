"""The course on a real JupyterHub (`make hub`, the same command a person runs), driven in headless
Chromium: real Unix accounts, each JupyterLab spawned as its user, the shared exchange.

1. the instructor logs in and releases `rlhf` and its Chinese edition `rlhf_zh` from the Formgrader;
2. two students log in (separate browser contexts): Alice in English, Bob in Chinese (JupyterLab's language
   pack, his own setting); each fetches their edition from the Assignment List, types answers into the answer
   cells (Alice's correct, Bob's with a PPO clip without the min and a written answer in Chinese), moves an
   explorer slider, Validates (Alice passes, Bob sees the failing test) and Submits; the Assignment List shows each
   the due date in their language, and Bob, given 48 h more but submitting later still, is told how late he is;
3. the instructor collects in the Formgrader; trusted grading runs as root (`make grade`); the Formgrader
   shows both scores; the instructor releases feedback;
4. each student fetches their feedback and opens it: their own scores, no hidden test code, nothing of
   the other student; Bob's page in Chinese, with his due date, extension and lateness;
5. a student is refused another student's server, the Formgrader and the course directory;
6. from a student's shell, while a classmate's kernel runs: nothing of it can be heard (every loopback TCP
   port and every Unix socket subscribed to), its runtime files are unreadable, and it runs in its user's
   cgroup under the classroom's limits;
7. the hub restarts mid-class (issue #37): while it is down Alice's server still answers through the proxy, and
   after it every user's server and kernel are the same processes, her kernel's variables intact, reached through
   the new hub, whose own idle culler replaced the old hub's; her kernel's torch fits her CPU quota (one thread,
   OMP_WAIT_POLICY=PASSIVE);
8. everyone closes their browser; Alice's server, idle for the idle time, is stopped by jupyterhub-idle-culler
   (the classroom's culler, its command, token and scopes, run with a few seconds' idle time instead of make hub's
   hour): none of her processes is left (their memory returned), her files stay, her next start resumes with them;
9. the lab's SFT policy and reward model, trained once for the class by make hub, are where her lab looks (the
   class's labs at the smoke setting here, HUB_LAB_SETTING: the same training call as the default quick one's, a
   few steps instead of 11 CPU-seconds; the default is checked without a hub at the end).

Each step is a test of its own (test_01_... to test_15_..., in this order) on one hub and one browser: the
first failure names its step, and the steps after it are skipped.  A screenshot of every open page lands in
test-artifacts/hub/ on the first failure; RLHF_HUB_SCREENSHOTS=1 takes them at every step too (and the
Assignment List's deadlines that docs/images/ shows).
Needs root (accounts, setuid spawning), chromium, npm (the proxy) and bubblewrap (trusted grading).
"""
import asyncio
import concurrent.futures
import contextlib
import csv
import datetime
import hashlib
import hmac
import json
import os
import pwd
import re
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid
from pathlib import Path

import nbformat
import pytest

from rlhf_course import ASSIGNMENT, NOTEBOOK, i18n
from rlhf_course.classroom.accounts import User
from rlhf_course.classroom.hub import IDLE_TIMEOUT, free_port
from rlhf_course.grading import examples
from rlhf_course.course import notebooks
from rlhf_course.classroom.server_env import ServerEnv
from rlhf_course.classroom.tcp_binds import bind_rules_supported
from tests.support import solutions
from tests.support.browser import CHROMIUM, CHROMIUM_FLAGS, INSTRUCTOR_ONLY, nbgrader_menu_items, offered
from tests.support.course import repo_course

pytestmark = pytest.mark.slow
ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts" / "hub"
PREFIX = f"rlhfh{os.getpid() % 1000}_"  # per run: two checkouts may run this test at once
WRITTEN = "lab_question_1"  # the written answer the instructor grades by hand
WRITTEN_COMMENT = "Right: the reward model never saw a repeat, so without the KL penalty PPO would exploit it."
ZH = "rlhf_zh"  # the Chinese edition, Bob's
# the due date `make hub` records (tests/conftest.py's RLHF_DUE_DATE), as the Assignment List shows it
DUE_SHOWN = "2100-01-01 00:00 UTC"
DUE_SAID = {False: "due", True: "截止时间"}  # Alice's words, Bob's
ANSWER_CELLS = ("ppo_answer", "dpo_answer", "gae_answer", "lab_question_1", "lab_question_2", "lab_question_3")
SCREENSHOTS = bool(os.environ.get("RLHF_HUB_SCREENSHOTS"))  # of every step, for a person to look at
IDLE = 5  # seconds: the idle time the classroom's culler runs with in step 14 (make hub's is an hour)
LAB_SETTING = "smoke"  # the class's labs (HUB_LAB_SETTING), whose two first stages make hub trains (make hub's: quick)


def _needs(repo):
    from rlhf_course.grading.sandbox.sandbox import sandbox_available
    problems = []
    if os.geteuid() != 0:
        problems.append("root")
    for tool in ("setpriv", "useradd", "npm", "node"):
        if not shutil.which(tool):
            problems.append(tool)
    if not Path(CHROMIUM).exists():
        problems.append(CHROMIUM)
    if sandbox_available():
        problems.append(f"the grading sandbox ({sandbox_available()})")
    if problems:
        message = "the JupyterHub test needs " + ", ".join(problems)
        pytest.fail(message) if os.environ.get("CI") else pytest.skip(message)


@pytest.fixture(scope="module")
def hub(repo, tmp_path_factory):
    """`make hub` on a free loopback port, with its own accounts and folder; stopped (accounts removed) after."""
    _needs(repo)
    scratch = Path(tempfile.mkdtemp(prefix="rlhf-hub-test-"))  # outside pytest's 0700 folder: users traverse it
    scratch.chmod(0o755)
    base = scratch / "classroom"
    log = open(tmp_path_factory.mktemp("hub-log") / "make-hub.log", "w+")
    started = time.time()
    process = subprocess.Popen(
        ["make", "--no-print-directory", "-C", str(repo), "hub", f"HUB_PORT={free_port()}", f"HUB_BASE={base}",
         f"HUB_PREFIX={PREFIX}", "HUB_STUDENTS=alice bob", "HUB_MAKE_PRIVATE=1", f"HUB_LAB_SETTING={LAB_SETTING}"],
        stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
        # as `nohup make hub &` starts it: SIGINT ignored, which the hub's culler must not inherit (step 13)
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))
    ready = base / "hub" / "ready"
    try:
        while not ready.exists():
            if process.poll() is not None or time.time() - started > 600:
                log.seek(0)
                raise AssertionError(f"make hub did not start:\n{log.read()[-5000:]}")
            time.sleep(0.5)
        print(f"make hub ready in {time.time() - started:.0f} s")
        accounts = json.loads((base / "hub" / "accounts.json").read_text())
        yield {**accounts, "hub_dir": base / "hub", "log": log}
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGTERM)
        process.wait(timeout=60)
        deadline = time.time() + 90  # the classroom removes its accounts on the way out
        while any(_exists(name) for name in (f"{PREFIX}instructor", f"{PREFIX}alice", f"{PREFIX}bob")):
            if time.time() > deadline:
                log.seek(0)
                raise AssertionError(f"make hub left its accounts behind:\n{log.read()[-3000:]}")
            time.sleep(0.5)
        log.close()
        shutil.rmtree(scratch, ignore_errors=True)


def _exists(name: str) -> bool:
    try:
        pwd.getpwnam(name)
        return True
    except KeyError:
        return False


class Steps:
    """Screenshots of every open page at the first failure (and after each step with RLHF_HUB_SCREENSHOTS=1); after
    a failed step the later steps are skipped (each is a test of its own: the first failure names its step)."""

    def __init__(self):
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        for old in ARTIFACTS.glob("*.png"):
            old.unlink()
        self.pages, self.count, self.failed = {}, 0, None

    def shoot(self, label: str, failed: bool = False) -> None:
        if not (SCREENSHOTS or failed):
            return
        for who, page in self.pages.items():
            with contextlib.suppress(Exception):
                page.screenshot(path=str(ARTIFACTS / f"{self.count:02d}_{label}_{who}.png"))

    @contextlib.contextmanager
    def step(self, label: str):
        if self.failed:
            pytest.skip(f"the scenario stopped at step {self.failed!r}")
        self.count += 1
        started = time.time()
        try:
            yield
        except BaseException:
            self.failed = label
            self.shoot(f"{label}_FAILED", failed=True)
            raise
        self.shoot(label)
        print(f"step {self.count} {label}: {time.time() - started:.1f} s")


def begin_login(browser, hub, name: str, then: str = ""):
    """Log in; the hub starts the user's server meanwhile (several users' at once: see finish_login), then sends the
    browser to their JupyterLab, or to ``then`` (a path of their server's)."""
    context = browser.new_context(viewport={"width": 1400, "height": 900})
    page = context.new_page()
    # the hub starts no server for a link into it: ``then`` through its spawn page, as its home page's button does
    spawn = f"/hub/spawn/{name}?next=" + urllib.parse.quote(f"/user/{name}/{then}", safe="")
    page.goto(f"{hub['url']}/hub/login" + ("?next=" + urllib.parse.quote(spawn, safe="") if then else ""))
    page.fill("#username_input", name)
    page.fill("#password_input", hub["passwords"][name])
    page.click("#login_submit")
    return page


def finish_login(page, name: str):
    """The user's JupyterLab, once the hub has started their server and sent the browser there."""
    page.wait_for_url(re.compile(rf"/user/{name}/lab"), timeout=120_000)
    page.locator(".jp-LabShell").wait_for(timeout=120_000)
    return page


def formgrader_action(page, hub, action: str, expected: str, assignment: str = ASSIGNMENT, load: bool = True) -> None:
    """Manage Assignments: the `action` column's link on the assignment's row, then the success dialog (``load``:
    the page loaded first; without, it is open already, no dialog on it)."""
    if load:
        page.goto(f"{hub['url']}/user/{hub['instructor']}/formgrader/manage_assignments")
    row = page.locator("tr").filter(has=page.locator("td.name", has_text=re.compile(rf"^\s*{assignment}\s*$")))
    row.locator(f"td.{action} a").click(timeout=60_000)
    page.locator(".modal").get_by_text(expected).wait_for(timeout=120_000)


def formgrader_put(page, hub, what: str, body: dict) -> None:
    """What the Formgrader's dialogs send (Manage Students' Add, Manage Assignments' Edit: its API's PUT of
    ``what``, e.g. assignment/rlhf_zh), from the instructor's Formgrader page."""
    formgrader = f"{hub['url']}/user/{hub['instructor']}/formgrader"
    if not page.url.startswith(formgrader):
        page.goto(f"{formgrader}/manage_assignments")
    status = page.evaluate("""async ([url, body]) => {
        const xsrf = decodeURIComponent(document.cookie.match(/_xsrf=([^;]+)/)[1]);
        const response = await fetch(url, {method: "PUT", headers: {"X-XSRFToken": xsrf}, body: JSON.stringify(body)});
        return response.status; }""", [f"{formgrader}/api/{what}", body])
    assert status == 200, (what, status)


def disabled_lab_plugins(page, hub, name: str) -> list[str]:
    """The plugins a user's JupyterLab leaves out (its page config's disabledExtensions: the labconfig their server
    reads), from the lab's HTML as their browser context fetches it, without rendering it."""
    html = page.context.request.get(f"{hub['url']}/user/{name}/lab").text()
    found = re.search(r'<script id="jupyter-config-data" type="application/json">(.*?)</script>', html, re.S)
    assert found, html[:2000]
    disabled = json.loads(found.group(1))["disabledExtensions"]
    return [plugin for plugin, off in disabled.items() if off] if isinstance(disabled, dict) else list(disabled)


# nbgrader's instructor tools in JupyterLab (the Nbgrader menu's INSTRUCTOR_ONLY items): the students' labconfig
# disables them (jupyter/student/labconfig); tests/browser/test_lab_views.py reads both menus as rendered
INSTRUCTOR_PLUGINS = ("@jupyter/nbgrader:formgrader", "@jupyter/nbgrader:course-list",
                      "@jupyter/nbgrader:create-assignment")
MATHJAX = "@jupyterlab/mathjax-extension"


def assignment_list(page, hub, name: str, reload: bool = True) -> None:
    """Nbgrader > Assignment List; with ``reload``, in a freshly loaded lab (the panel lists what the exchange
    holds when it opens: feedback released since needs a new one)."""
    if reload:
        page.goto(f"{hub['url']}/user/{name}/lab")
    from playwright.sync_api import TimeoutError as PlaywrightTimeout
    item = page.get_by_role("menuitem", name="Assignment List", exact=True)
    # On a loaded machine a click on the menu bar's Nbgrader right after an Escape once toggled its menu shut
    for _ in range(3):
        page.get_by_role("menuitem", name="Nbgrader", exact=True).click()
        try:
            item.wait_for(timeout=10_000)
            break
        except PlaywrightTimeout:
            page.keyboard.press("Escape")
    item.click()


def assignment_row(page, assignment: str):
    """The Assignment List's row of one assignment (a student sees both editions), its name perhaps followed by the
    deadline the course's lab extension shows, "(due ...)"."""
    return page.locator(".list_item").filter(
        has=page.locator(".item_name", has_text=re.compile(rf"^\s*{assignment}\s*(\(.*\))?\s*$"))).first


def type_into_cell(page, index: int, text: str, markdown: bool) -> None:
    """Replace a cell's text as a student would, through the editor (inserted, not auto-indented)."""
    cell = page.locator(".jp-Notebook .jp-Cell").nth(index)
    cell.scroll_into_view_if_needed()
    if markdown:
        cell.dblclick()
    editor = cell.locator(".cm-content")
    editor.click()
    page.keyboard.press("Control+A")
    page.keyboard.insert_text(text)
    page.keyboard.press("Escape")


def quiet_lab_settings(user: User, locale: str | None = None) -> None:
    """Render every cell (no virtual windowing) so the test reaches each one, and JupyterLab in ``locale``
    (Settings -> Language, through the language pack): the student's own settings.  And no MathJax in their lab
    (their own labconfig, beside the classroom's): it typesets the notebook's hundreds of formulas, seconds of
    Chromium's CPU that no step reads, as in tests/browser's labs (the math's rendering is the Formgrader's and the
    feedback pages' tests')."""
    labconfig = user.home / ".jupyter" / "labconfig"
    labconfig.mkdir(parents=True)
    (labconfig / "page_config.json").write_text(json.dumps({"disabledExtensions": {MATHJAX: True}}))
    settings = user.home / ".jupyter" / "lab" / "user-settings" / "@jupyterlab"
    (settings / "notebook-extension").mkdir(parents=True)
    (settings / "notebook-extension" / "tracker.jupyterlab-settings").write_text(json.dumps({"windowingMode": "none"}))
    if locale:
        (settings / "translation-extension").mkdir(parents=True)
        (settings / "translation-extension" / "plugin.jupyterlab-settings").write_text(json.dumps({"locale": locale}))
    subprocess.run(["chown", "-R", f"{user.uid}:{user.gid}", str(user.home / ".jupyter")], check=True)


# Run as a student: subscribe to everything on this machine a ZMQ kernel could be listening on (every
# loopback TCP port, every named Unix socket) and count what arrives, from "listening" until the test closes
# standard input.
OVERHEAR = r"""
import json, sys, time, zmq
seconds = float(sys.argv[1])  # at most; the test closes standard input when Alice is done
targets = []
for table, loopback in (("/proc/net/tcp", "0100007F"), ("/proc/net/tcp6", "00000000000000000000000001000000")):
    for line in open(table).read().splitlines()[1:]:
        fields = line.split()
        address, port = fields[1].split(":")
        if fields[3] == "0A" and address in (loopback, "0" * len(loopback)):
            targets.append(("tcp://127.0.0.1:" if "6" not in table else "tcp://[::1]:") + str(int(port, 16)))
for line in open("/proc/net/unix").read().splitlines()[1:]:
    fields = line.split()
    if len(fields) >= 8 and fields[7].startswith("/"):
        targets.append("ipc://" + fields[7])
context = zmq.Context()
context.setsockopt(zmq.IPV6, 1)
poller = zmq.Poller()
for target in targets:
    socket = context.socket(zmq.SUB)
    socket.setsockopt(zmq.SUBSCRIBE, b"")
    socket.setsockopt(zmq.LINGER, 0)
    socket.connect(target)
    poller.register(socket, zmq.POLLIN)
poller.register(sys.stdin, zmq.POLLIN)
print("listening", flush=True)
heard, deadline, done = [], time.time() + seconds, False
while time.time() < deadline and not done:
    for socket, _ in poller.poll(200):
        if socket in (sys.stdin, sys.stdin.fileno()):  # (zmq's poller names a file by its descriptor)
            done = not sys.stdin.readline()  # closed: Alice is done
            continue
        frames = socket.recv_multipart()
        if sum(map(len, frames)) < 2**18:  # status, code, text: a message's bytes, to check whose it is
            heard.append([frame.decode("latin-1") for frame in frames])
print(json.dumps({"targets": targets, "heard": heard}))
"""


def signed_with(frames: list[str], keys: list[str]) -> bool:
    """A Jupyter message (its frames as latin-1) signed with one of these connection keys."""
    if "<IDS|MSG>" not in frames:
        return False
    at = frames.index("<IDS|MSG>")
    body = b"".join(frame.encode("latin-1") for frame in frames[at + 2:at + 6])
    return any(hmac.compare_digest(hmac.new(key.encode(), body, hashlib.sha256).hexdigest(), frames[at + 1])
               for key in keys)


def processes(uid: int) -> dict[int, str]:
    found = {}
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and entry.stat().st_uid == uid:
                found[int(entry.name)] = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            pass
    return found


def tcp_listeners(pid: int) -> list[int]:
    """The TCP ports process `pid` listens on."""
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            target = os.readlink(fd)
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    ports = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            if fields[3] == "0A" and fields[9] in inodes:
                ports.append(int(fields[1].split(":")[1], 16))
    return ports


# -- a student's REST calls with her own token (steps 13 and 14: no browser) --------------------------------

def api_token(page, hub, name: str) -> str:
    """A token of hers.  She cannot make one (the classroom's users' role has no ``tokens`` scope: a token's note was
    stored in the hub's database whatever its size), as the hub's token page would from her logged-in browser, so
    root makes it, as ``jupyterhub token`` does, from the hub's configuration and database."""
    [xsrf] = [c["value"] for c in page.context.cookies(f"{hub['url']}/hub/") if c["name"] == "_xsrf"]
    response = page.context.request.post(f"{hub['url']}/hub/api/users/{name}/tokens",
                                         headers={"X-XSRFToken": xsrf}, data={"note": "her REST calls"})
    assert response.status == 403, (response.status, response.text()[:500])
    made = subprocess.run([hub["python"], "-m", "jupyterhub", "token", "-f",
                           str(hub["hub_dir"] / "jupyterhub_config.py"), name], cwd=hub["hub_dir"],
                          env={"PATH": hub["path"], "LANG": "C.UTF-8", "HOME": str(hub["hub_dir"])},
                          capture_output=True, text=True, timeout=120)
    assert made.returncode == 0, made.stderr[-2000:]
    return made.stdout.split()[-1]


def api(hub, token: str, method: str, path: str, body=None, timeout: float = 30):
    """A REST call with ``token`` through the proxy: (status, parsed JSON or None)."""
    request = urllib.request.Request(hub["url"] + path, method=method,
                                     data=None if body is None else json.dumps(body).encode(),
                                     headers={"Authorization": f"token {token}"})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            text = response.read()
            return response.status, json.loads(text) if text else None
    except urllib.error.HTTPError as error:
        return error.code, None


def wait_for(what: str, condition, seconds: float, every: float = 0.5):
    deadline = time.time() + seconds
    while True:
        with contextlib.suppress(OSError):
            found = condition()
            if found:
                return found
        assert time.time() < deadline, f"{what}: not within {seconds:.0f} s"
        time.sleep(every)


def her_server(hub, token: str, name: str) -> dict | None:
    """Her server as the hub has it (``ready``, ``pending``...), or None when she has none."""
    status, user = api(hub, token, "GET", f"/hub/api/users/{name}")
    assert status == 200, status
    return user["servers"].get("")


def start_server(hub, token: str, name: str) -> None:
    """As her login does: start her server unless it runs; back when it is ready."""
    if not (her_server(hub, token, name) or {}).get("ready"):
        status, _ = api(hub, token, "POST", f"/hub/api/users/{name}/server")
        assert status in (201, 202), status
    wait_for("her server", lambda: (her_server(hub, token, name) or {}).get("ready"), 120)


def run_code(hub, token: str, name: str, kernel: str, code: str) -> str:
    """Run ``code`` in the kernel over its websocket (as JupyterLab does); its printed output."""
    from tornado.httpclient import HTTPRequest
    from tornado.websocket import websocket_connect

    async def run():
        url = hub["url"].replace("http", "ws") + f"/user/{name}/api/kernels/{kernel}/channels"
        connection = await websocket_connect(HTTPRequest(url, headers={"Authorization": f"token {token}"}))
        msg_id = uuid.uuid4().hex
        connection.write_message(json.dumps({
            "header": {"msg_id": msg_id, "msg_type": "execute_request", "session": uuid.uuid4().hex,
                       "username": name, "version": "5.3", "date": datetime.datetime.now().isoformat()},
            "parent_header": {}, "metadata": {}, "channel": "shell",
            "content": {"code": code, "silent": False, "store_history": False, "user_expressions": {},
                        "allow_stdin": False, "stop_on_error": True}}))
        printed = []
        while True:
            message = json.loads(await connection.read_message())
            if message.get("parent_header", {}).get("msg_id") != msg_id:
                continue
            if message["msg_type"] == "stream":
                printed.append(message["content"]["text"])
            if message["msg_type"] == "error":
                printed.append(message["content"]["ename"])
            if message["msg_type"] == "status" and message["content"]["execution_state"] == "idle":
                connection.close()
                return "".join(printed)

    with concurrent.futures.ThreadPoolExecutor(1) as thread:  # Playwright's event loop runs in this one
        return thread.submit(asyncio.run, asyncio.wait_for(run(), 60)).result()


BIND_ANY_PORT = ("import socket\ntry:\n    socket.socket().bind(('127.0.0.1', 0))\n    print('bound')\n"
                 "except PermissionError:\n    print('refused')")
THREADS = """import os, torch
from rlhf_course.lab import notebook_setting, shared_stages, threads, train
print(torch.get_num_threads(), threads.lab_threads(), os.environ["OMP_WAIT_POLICY"], notebook_setting(),
      shared_stages.cache_file(train.LabConfig.setting(notebook_setting()), threads.lab_threads()))
"""  # torch's own thread count (from OMP_NUM_THREADS), the lab's, the wait policy, her lab's setting, its cache file


def cullers(hub) -> dict[int, list[str]]:
    """This classroom's jupyterhub-idle-culler processes (the hub's service; its environment's Python is this
    run's own): pid -> argv."""
    found = {}
    for entry in Path("/proc").iterdir():
        with contextlib.suppress(OSError):
            if entry.name.isdigit():
                argv = [os.fsdecode(a) for a in (entry / "cmdline").read_bytes().split(b"\0")[:-1]]
                if argv[:3] == [hub["python"], "-m", "jupyterhub_idle_culler"]:
                    found[int(entry.name)] = argv
    return found


KERNEL = "-m rlhf_course.classroom.kernel_launcher -f "  # every kernel's command line: the classroom's python3 spec


OPEN_FILES = """
import json, os
folder = "/proc/{pid}/fd"
targets = []
for fd in os.listdir(folder):
    try:
        targets.append(os.readlink(f"{{folder}}/{{fd}}"))
    except OSError:  # closed meanwhile
        pass
print(json.dumps(targets))
"""  # what a process's descriptors point at, as its user reads them
SERVER_RUNNING = r"Jupyter Server \S+ is running at"  # a server's line at its start


def servers_and_kernels(users, names) -> dict[int, str]:
    """Every Jupyter server and kernel process of these users: pid -> command line."""
    return {pid: cmd for name in names for pid, cmd in processes(users[name].uid).items()
            if "jupyterhub.singleuser" in cmd or KERNEL in cmd}


class Scenario:
    """What the steps share: the hub, its users and their answers, one Chromium with a page per person."""

    def __init__(self, hub, repo, browser):
        self.hub, self.browser = hub, browser
        self.server = ServerEnv.__new__(ServerEnv)  # the classroom's environment, for commands run as its users
        self.server.python, self.server.path = hub["python"], hub["path"]
        self.users = {name: User(name, Path(hub["homes"][name]), self.server) for name in hub["homes"]}
        self.instructor = hub["instructor"]
        self.alice, self.bob = hub["students"]
        self.course = Path(hub["course"])
        source = notebooks.read(repo / "source" / ASSIGNMENT / NOTEBOOK)
        written = solutions.written_solutions(source)
        self.answers = {self.alice: {**examples.answers_for(repo_course(), ()), **written},  # a written answer may be Chinese:
                        self.bob: {**examples.answers_for(repo_course(), ("ppo_clip_without_min",)), **written,
                                   "lab_question_2": "多样性：它反复说同几个正面的词。"}}
        # Bob reads Chinese: JupyterLab in Chinese, the Chinese edition
        self.edition = {self.alice: ASSIGNMENT, self.bob: ZH}
        self.index = {student: {notebooks.grade_id(cell): i for i, cell in
                                enumerate(notebooks.read(repo / "release" / self.edition[student] / NOTEBOOK).cells)}
                      for student in (self.alice, self.bob)}
        self.steps = Steps()
        self.pages = self.steps.pages
        self.logging_in, self.listener = {}, None  # what one step leaves the next
        self.token, self.kernel, self.lab_cache_file = None, None, None  # Alice's, from step 13 on

    def all(self):
        return (self.hub, self.browser, self.server, self.users, self.instructor, self.alice, self.bob, self.course,
                self.answers, self.edition, self.index, self.steps, self.pages)


@pytest.fixture(scope="module")
def scenario(hub, repo):
    """The course on the hub, step by step: each step below is a test, in this order, on the state the steps
    before it left (a failed step skips the rest)."""
    from playwright.sync_api import sync_playwright
    started = time.time()
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_FLAGS, headless=True)
        yield Scenario(hub, repo, browser)
        browser.close()
    print(f"the whole course on the hub: {time.time() - started:.0f} s")


def test_01_instructor_releases(scenario):
    hub, browser, server, users, instructor, alice, bob, course, answers, edition, index, steps, pages = scenario.all()
    with steps.step("instructor_releases"):
        # everyone logs in at once, as a class would: the students' servers start while the instructor releases
        for student in (alice, bob):
            quiet_lab_settings(users[student], "zh_CN" if student == bob else None)
        # the instructor straight to the Formgrader (the page the release needs; no JupyterLab to render first)
        scenario.logging_in = {name: begin_login(browser, hub, name, "formgrader/manage_assignments" if
                                                 name == instructor else "") for name in (instructor, alice, bob)}
        pages["instructor"] = page = scenario.logging_in[instructor]
        # (not the hub's spawn-pending page, whose address names it in its ?next=)
        page.wait_for_url(re.compile(rf"^{re.escape(hub['url'])}/user/{instructor}/formgrader/manage_assignments"),
                          timeout=120_000)
        # the instructor's lab keeps nbgrader's tools: the instructor's server reads no student labconfig (the
        # students' menus are read in step 2)
        assert not set(INSTRUCTOR_PLUGINS) & set(disabled_lab_plugins(page, hub, instructor))
        for assignment in (ASSIGNMENT, ZH):  # the hub serves both editions
            formgrader_action(page, hub, "release", f"Successfully released '{assignment}'.", assignment,
                              load=assignment != ASSIGNMENT)
            assert (Path(hub["exchange"]) / "rlhf-course" / "outbound" / assignment / NOTEBOOK).is_file()


def test_02_students_fetch(scenario):
    hub, browser, server, users, instructor, alice, bob, course, answers, edition, index, steps, pages = scenario.all()
    with steps.step("students_fetch"):
        for student in (alice, bob):
            pages[student] = page = finish_login(scenario.logging_in[student], student)
            menus = page.locator(".lm-MenuBar").inner_text()
            assert ("编辑" in menus) == (student == bob), menus  # the language pack, for Bob only
            items = nbgrader_menu_items(page)  # the students' labconfig: no instructor tools
            assert "Assignment List" in items and not offered(INSTRUCTOR_ONLY, items), items
            # the control of step 1's; and the student's own labconfig read beside the classroom's
            assert {*INSTRUCTOR_PLUGINS, MATHJAX} <= set(disabled_lab_plugins(page, hub, student))
            page.keyboard.press("Escape")
            assignment_list(page, hub, student, reload=False)  # the lab has just loaded
            row = assignment_row(page, edition[student])
            row.get_by_role("button", name="Fetch").click(timeout=60_000)
            assignment_row(page, edition[student]).get_by_role("button", name="Submit").wait_for(timeout=60_000)
            # the due date the exchange holds (published by the Formgrader's Release), in the student's language
            due = assignment_row(page, edition[student]).locator(".rlhf-deadline")
            due.wait_for(timeout=30_000)
            assert due.inner_text() == f" ({DUE_SAID[student == bob]} {DUE_SHOWN})", due.inner_text()
            fetched = users[student].home / edition[student] / NOTEBOOK
            assert fetched.is_file() and fetched.stat().st_uid == users[student].uid


def test_03_students_answer(scenario):
    hub, browser, server, users, instructor, alice, bob, course, answers, edition, index, steps, pages = scenario.all()
    with steps.step("students_answer"):
        for student in (alice, bob):  # both open it at once: their kernels start together, as a class's would
            page = pages[student]
            # from the Assignment List, as a student opens it: the assignment's notebooks, then this one
            row = assignment_row(page, edition[student])
            row.locator("a.assignment-notebooks-link").click(timeout=60_000)
            row.locator(".collapse a", has_text=NOTEBOOK.removesuffix(".ipynb")).click(timeout=60_000)
        for student in (alice, bob):
            page = pages[student]
            page.locator(".jp-Notebook").wait_for(timeout=60_000)
            page.locator(".jp-Notebook-ExecutionIndicator[data-status='idle']").first.wait_for(timeout=60_000)
            for grade_id in ANSWER_CELLS:
                type_into_cell(page, index[student][grade_id], answers[student][grade_id],
                               markdown=grade_id.startswith("lab_question"))
            page.keyboard.press("Control+s")
        for student in (alice, bob):  # what the lab saved is what the student typed
            deadline = time.time() + 30
            while True:
                try:  # the lab may be writing it right now: an empty or partial file is read again
                    saved = notebooks.cells_by_grade_id(
                        notebooks.read(users[student].home / edition[student] / NOTEBOOK))
                except (ValueError, nbformat.reader.NotJSONError):
                    saved = {}
                if saved and all(saved[g].source.strip() == answers[student][g].strip() for g in ANSWER_CELLS):
                    break
                assert time.time() < deadline, f"{student}'s typed answers were not saved"
                time.sleep(0.5)


def test_04_slider(scenario):
    hub, browser, server, users, instructor, alice, bob, course, answers, edition, index, steps, pages = scenario.all()
    with steps.step("slider"):
        # Bob listens from his shell while Alice's kernel runs her cells (code and outputs on its IOPub), once her
        # kernel has bound its sockets (the lab may show "idle" before the kernel it asked for runs: on a loaded
        # machine Bob's list of sockets missed it)
        wait_for("Alice's kernel's sockets", lambda: f" /run/rlhf-classroom/{alice}/kernel-" in
                 Path("/proc/net/unix").read_text(), 120)
        listener = scenario.listener = subprocess.Popen(
            ["setpriv", f"--reuid={users[bob].uid}", f"--regid={users[bob].gid}", "--init-groups", "env", "-i",
             f"HOME={users[bob].home}", f"PATH={server.path}", server.python, "-c", OVERHEAR, "120"],
            cwd=users[bob].home, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        ready = listener.stdout.readline()  # connected before Alice runs anything
        assert ready.strip() == "listening", ready + listener.stderr.read()[-3000:]
        page = pages[alice]
        for grade_id in ("setup", "ppo_answer", "ppo_explorer"):
            cell = page.locator(".jp-Notebook .jp-Cell").nth(index[alice][grade_id])
            cell.scroll_into_view_if_needed()
            cell.locator(".cm-content").click()
            page.keyboard.press("Shift+Enter")
        explorer = page.locator(".jp-Notebook .jp-Cell").nth(index[alice]["ppo_explorer"])
        explorer.locator(".jp-OutputArea-output img").first.wait_for(timeout=120_000)
        before = explorer.locator(".jp-OutputArea-output img").first.get_attribute("src")
        slider = explorer.locator(".widget-slider").filter(has_text="epsilon").first
        slider.locator(".widget-readout").click()
        page.keyboard.press("Control+A")
        page.keyboard.type("0.45")
        page.keyboard.press("Enter")
        page.wait_for_function(
            "([el, before]) => { const img = el.querySelector('.jp-OutputArea-output img');"
            " return img && img.getAttribute('src') !== before; }",
            arg=[explorer.element_handle(), before], timeout=60_000)


def test_05_kernels_private(scenario):
    hub, browser, server, users, instructor, alice, bob, course, answers, edition, index, steps, pages = scenario.all()
    with steps.step("kernels_private"):
        listener = scenario.listener
        out, err = listener.communicate(timeout=60)  # closes its standard input: Alice is done
        assert listener.returncode == 0, err[-3000:]
        overheard = json.loads(out.splitlines()[-1])
        print(f"bob subscribed to {len(overheard['targets'])} sockets and heard {len(overheard['heard'])} messages")
        kernels = {pid: cmd for pid, cmd in processes(users[alice].uid).items() if KERNEL in cmd}
        assert kernels, "Alice's kernel is not running"
        # Other tests on this machine may run kernels of root's over TCP (Bob hears those): what counts is a
        # message of Alice's, one signed with her kernel's key
        keys = [json.loads(Path(cmd.split(" -f ")[1].split()[0]).read_text())["key"] for cmd in kernels.values()]
        assert not [m for m in overheard["heard"] if signed_with(m, keys)], "Bob heard Alice's kernel"
        for pid, cmd in kernels.items():
            connection = Path(cmd.split(" -f ")[1].split()[0])
            assert connection.parent == Path("/run/rlhf-classroom") / alice, connection
            assert json.loads(connection.read_text())["transport"] == "ipc"
            assert f"ipc://{connection.parent}" in " ".join(overheard["targets"])  # Bob tried its sockets
            # nor its pipe for forked children's output (rlhf_course/classroom/kernel_launcher.py): a Unix socket
            # in a 0700 folder of hers, not ipykernel's loopback TCP port
            assert not tcp_listeners(pid), cmd
            pipes = list(connection.parent.glob("kernel-pipe-*/pipe"))
            assert pipes and all(stat.S_IMODE(pipe.parent.stat().st_mode) == 0o700 for pipe in pipes), pipes
            probe = users[bob].python(f"import os\ntry:\n    open({str(connection)!r}).read()\n    print('READ')\n"
                                      "except PermissionError:\n    print('denied')")
            assert probe.stdout.strip() == "denied"
            # the kernel runs in Alice's cgroup, under the classroom's limits
            assert f"rlhf-classroom/{alice}" in Path(f"/proc/{pid}/cgroup").read_text()
            limits = Path(f"/proc/{pid}/limits").read_text()
            assert re.search(r"Max processes\s+256\s+256", limits), limits
            assert re.search(r"Max file size\s+1073741824\s+1073741824", limits), limits
        # every user's server, the instructor's too, reads the config that makes its kernels private
        for name in (instructor, alice, bob):
            [server_pid] = [pid for pid, cmd in processes(users[name].uid).items() if "jupyterhub.singleuser" in cmd]
            environ = dict(item.split("=", 1) for item in
                           Path(f"/proc/{server_pid}/environ").read_text().split("\0") if "=" in item)
            folders = [Path(f) for f in environ["JUPYTER_CONFIG_PATH"].split(":")]
            assert any(json.loads((f / "jupyter_config.json").read_text()).get("KernelManager", {}).get(
                "transport") == "ipc" for f in folders if (f / "jupyter_config.json").exists()), (name, folders)
            assert environ["JUPYTER_RUNTIME_DIR"] == f"/run/rlhf-classroom/{name}", name
            assert f"rlhf-classroom/{name}" in Path(f"/proc/{server_pid}/cgroup").read_text()
        # no server or kernel holds the hub's log (every login's name is in it, a password typed as one too), each
        # server writes its own: every descriptor they hold, as their user reads /proc/PID/fd
        hub_log = hub["hub_dir"] / "jupyterhub.log"
        for name in (instructor, alice, bob):
            own_log = hub["hub_dir"] / "servers" / f"{name}.log"
            for pid, cmd in servers_and_kernels(users, [name]).items():
                targets = json.loads(users[name].python(OPEN_FILES.format(pid=pid)).stdout)
                assert targets and str(hub_log) not in targets, (name, cmd, targets)
                if "jupyterhub.singleuser" in cmd:
                    assert str(own_log) in targets, (name, targets)
            assert re.search(SERVER_RUNNING, own_log.read_text(errors="replace")), name
            assert own_log.stat().st_uid == 0 and own_log.stat().st_mode & 0o777 == 0o600
        assert not re.search(SERVER_RUNNING, hub_log.read_text(errors="replace"))


def test_06_validate(scenario):
    hub, browser, server, users, instructor, alice, bob, course, answers, edition, index, steps, pages = scenario.all()
    with steps.step("validate"):
        for student in (alice, bob):  # both validate at once, as a class would
            pages[student].get_by_role("button", name="Validate").first.click()
        pages[alice].locator(".jp-Dialog").get_by_text(
            "Success! Your notebook passes all the tests.").wait_for(timeout=180_000)
        failure = pages[bob].locator(".jp-Dialog")  # his Chinese edition's: nbgrader's lines in Chinese
        failure.get_by_text(i18n.ZH["The following cell failed:"]).first.wait_for(timeout=180_000)
        assert "Success!" not in failure.inner_text() and i18n.ZH["Validation Results"] in failure.inner_text()
        assert "ppo_clipped_objective" in failure.inner_text() or "ppo" in failure.inner_text().lower()


def test_07_students_submit(scenario):
    hub, browser, server, users, instructor, alice, bob, course, answers, edition, index, steps, pages = scenario.all()
    with steps.step("students_submit"):
        inbound = Path(hub["exchange"]) / "rlhf-course" / "inbound"
        # Bob was given 48 h more on the Chinese edition (the instructor's command), whose due date the instructor
        # then sets to 50 h 10 min ago in the Formgrader: both reach the exchange, and Bob submits 2 h 10 min after
        # his own deadline.
        formgrader_put(pages["instructor"], hub, f"student/{bob}", {})  # no name: the Formgrader lists his id
        users[instructor].run(server.python, "-m", "rlhf_course.grading", "extend", bob, ZH, "--hours", "48",
                              cwd=course, env={"RLHF_EXCHANGE_ROOT": hub["exchange"]})
        bob_due = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(time.time() - (50 * 3600 + 10 * 60)))
        formgrader_put(pages["instructor"], hub, f"assignment/{ZH}", {"duedate_notimezone": bob_due,
                                                                       "duedate_timezone": "UTC"})
        for student in (alice, bob):
            page = pages[student]
            page.keyboard.press("Escape")
            assignment_list(page, hub, student, reload=False)  # it lists the fetched assignment, as when it opened
            assignment_row(page, edition[student]).get_by_role("button", name="Submit").click(timeout=60_000)
            deadline = time.time() + 60
            while not list(inbound.glob(f"{student}+{edition[student]}+*")):
                assert time.time() < deadline, f"{student}'s submission never reached the exchange"
                time.sleep(0.5)
        # What the Submit's answer (the list) tells each, beside the submission: accepted, on time or how late
        verdict = {student: pages[student].locator("#submitted_assignments_list .nested_list_item .rlhf-deadline")
                   for student in (alice, bob)}
        verdict[alice].wait_for(timeout=30_000)
        assert verdict[alice].inner_text() == " (on time)", verdict[alice].inner_text()
        verdict[bob].wait_for(timeout=30_000)
        assert re.fullmatch(r" \(迟交 2 小时 1[01] 分钟，将扣除迟交罚分\)", verdict[bob].inner_text()), \
            verdict[bob].inner_text()
        assert "rlhf-deadline-late" in verdict[bob].get_attribute("class")
        told = pages[bob].locator("#submitted_assignments_list .list_item", has_text=ZH).locator(".rlhf-deadline").first
        assert "你的延期 +48 小时" in told.inner_text(), told.inner_text()
        if SCREENSHOTS:  # docs/images/ has them, committed by hand
            for student, language in ((alice, "en"), (bob, "zh")):
                pages[student].locator("#assignments").first.screenshot(
                    path=str(ARTIFACTS / f"assignment_list_deadline_hub_{language}.png"))


def test_08_instructor_collects_and_grades(scenario):
    hub, browser, server, users, instructor, alice, bob, course, answers, edition, index, steps, pages = scenario.all()
    with steps.step("instructor_collects_and_grades"):
        page = pages["instructor"]
        for assignment in (ASSIGNMENT, ZH):
            formgrader_action(page, hub, "collect", f"Successfully collected submissions of '{assignment}'.",
                              assignment)
        # `sudo make grade` in the course directory: trusted, sandboxed, as root
        grading = subprocess.run(
            [sys.executable, "-m", "rlhf_course.grading", "grade", ASSIGNMENT, ZH, "--course-root", str(course)],
            cwd=course, env=dict(os.environ, RLHF_EXCHANGE_ROOT=hub["exchange"]), capture_output=True, text=True)
        assert grading.returncode == 0, grading.stdout[-3000:] + grading.stderr[-3000:]
        scores = {}
        for student in (alice, bob):
            page.goto(f"{hub['url']}/user/{instructor}/formgrader/gradebook/{edition[student]}/"
                      f"{NOTEBOOK.removesuffix('.ipynb')}")
            row = page.locator("tr").filter(has_text=student)
            scores[student] = row.locator("td.code-score").inner_text(timeout=60_000).strip()
        assert scores[alice] == "44 / 44", scores
        assert re.fullmatch(r"\d+(\.\d+)? / 44", scores[bob]) and float(scores[bob].split("/")[0]) < 44, scores
        # grade wrote the class's report (issue #38): both editions in one, Bob's catalogued mistake named, his
        # extension and lateness beside the due date, every student's row
        assert (course / "class_report" / f"{ASSIGNMENT}.html").is_file(), grading.stdout[-2000:]
        with open(course / "class_report" / f"{ASSIGNMENT}.csv", newline="", encoding="utf-8") as handle:
            rows = {(r["item"], r["measure"]): r for r in csv.DictReader(handle) if r["section"] == "student"}
        assert rows[(alice, "misconceptions")]["edition"] == ASSIGNMENT and rows[(bob, "misconceptions")]["edition"] == ZH
        assert rows[(alice, "misconceptions")]["value"] == "" and rows[(alice, "hours_late")]["value"] in ("0", "0.0")
        assert rows[(bob, "misconceptions")]["value"] == "ppo_clip_without_min", rows[(bob, "misconceptions")]
        assert float(rows[(bob, "extension_hours")]["value"]) == 48
        assert 2 < float(rows[(bob, "hours_late")]["value"]) < 2.5 and float(rows[(bob, "penalty")]["value"]) > 0


def test_09_instructor_grades_a_written_answer(scenario):
    from playwright.sync_api import expect
    hub, browser, server, users, instructor, alice, bob, course, answers, edition, index, steps, pages = scenario.all()
    with steps.step("instructor_grades_a_written_answer"):
        page = pages["instructor"]  # Manual Grading: Alice's first written answer, full points and a comment
        page.goto(f"{hub['url']}/user/{instructor}/formgrader/gradebook/{ASSIGNMENT}/{NOTEBOOK.removesuffix('.ipynb')}")
        page.locator("tr").filter(has_text=alice).locator("a.name-hidden").click(timeout=60_000)
        # the page binds its inputs once it has fetched the grades and comments: typing before is lost
        page.wait_for_function("() => window.formgrader && formgrader.grades && formgrader.grades.loaded"
                               " && formgrader.comments && formgrader.comments.loaded", timeout=60_000)
        for field, text, api in ((f"input.score#{WRITTEN}", "2", "/api/grade/"),
                                 (f"textarea#{WRITTEN}-comment", WRITTEN_COMMENT, "/api/comment/")):
            with page.expect_response(lambda r: api in r.url and r.request.method == "PUT", timeout=60_000):
                page.locator(field).fill(text)
                page.locator(field).press("Tab")  # the Formgrader saves on change
        steps.shoot("written_answer_graded")
        # (leaving the submission's page at once: left open, it goes on typesetting the notebook's math in Chromium
        # while the grading below runs, several CPU-seconds more)
        page.goto(f"{hub['url']}/user/{instructor}/formgrader/gradebook/{ASSIGNMENT}/{NOTEBOOK.removesuffix('.ipynb')}")
        row = page.locator("tr").filter(has_text=alice)
        # both PUTs were answered before this load, whose listing is fetched from the gradebook: the row is
        # awaited as the page fills it in, not reloaded
        expect(row.locator("td.written-score")).to_have_text(re.compile(r"^\s*2 / 6\s*$"), timeout=60_000)
        assert row.locator("td.score").inner_text().strip() == "46 / 50", row.inner_text()
        # grading Alice again (`make grade` for one student) refreshes her feedback page with the person's score; it
        # never overwrites it (nor after a score set through nbgrader's API: tests/grading/test_batch.py)
        grading = subprocess.run(
            [sys.executable, "-m", "rlhf_course.grading", "grade", ASSIGNMENT, "--student", alice,
             "--course-root", str(course)],
            cwd=course, env=dict(os.environ, RLHF_EXCHANGE_ROOT=hub["exchange"]), capture_output=True, text=True)
        assert grading.returncode == 0, grading.stdout[-3000:] + grading.stderr[-3000:]
        page.reload()
        row = page.locator("tr").filter(has_text=alice)
        assert row.locator("td.score").inner_text(timeout=60_000).strip() == "46 / 50", row.inner_text()


def test_10_instructor_releases_feedback(scenario):
    hub, browser, server, users, instructor, alice, bob, course, answers, edition, index, steps, pages = scenario.all()
    with steps.step("instructor_releases_feedback"):
        for assignment in (ASSIGNMENT, ZH):
            formgrader_action(pages["instructor"], hub, "release-feedback",
                              f"Successfully released feedback of '{assignment}'.", assignment)


def test_11_students_read_feedback(scenario):
    hub, browser, server, users, instructor, alice, bob, course, answers, edition, index, steps, pages = scenario.all()
    with steps.step("students_read_feedback"):
        for student, other in ((alice, bob), (bob, alice)):
            page = pages[student]
            assignment_list(page, hub, student, reload=False)  # it lists the submission, since Submit
            page.get_by_role("button", name="Fetch Feedback").click(timeout=60_000)  # one submitted assignment each
            page.get_by_text("(view feedback)").wait_for(timeout=60_000)
            [feedback] = list((users[student].home / edition[student] / "feedback").glob(
                f"*/{NOTEBOOK.replace('.ipynb', '.html')}"))
            relative = feedback.relative_to(users[student].home)
            page.goto(f"{hub['url']}/user/{student}/files/{relative}")
            text = page.locator("body").inner_text(timeout=60_000)
            if student == alice:
                assert "Tests: 44 / 44." in text and f"{ASSIGNMENT}: 46 / 50" in text
                assert WRITTEN_COMMENT in text
                assert re.search(rf"due {DUE_SHOWN}, submitted [-\d: ]+ UTC: on time", text), text[:2000]
            else:  # Bob's page is Chinese: the outcome, the table, what went wrong, his deadline
                assert re.search(r"测试得分：\d+(\.\d+)? / 44。", text) and "测试得分：44 / 44。" not in text, text[:2000]
                assert "问题所在" in text and "What went wrong" not in text
                assert re.search(r"截止时间 [-\d: ]+ UTC，你的延期 \+48 小时，提交于 [-\d: ]+ UTC：迟交 2 小时 1[01] 分钟"
                                 r"（扣 6 分）", text), text[:2000]  # 2 points per started hour
                steps.shoot("chinese_feedback")
            content = page.content()
            assert "BEGIN HIDDEN TESTS" not in content and "run_check" not in content
            assert other not in content
            if student == bob:
                assert WRITTEN_COMMENT not in content  # the comment was on Alice's answer only


def test_12_students_refused(scenario):
    hub, browser, server, users, instructor, alice, bob, course, answers, edition, index, steps, pages = scenario.all()
    with steps.step("students_refused"):
        page = pages[alice]
        refusals = {  # what Alice tries -> the status she gets
            f"/user/{bob}/lab": 403, f"/user/{bob}/api/contents/{ASSIGNMENT}": 403,  # Bob's server
            f"/user/{instructor}/formgrader": 403, f"/user/{instructor}/lab": 403,  # the instructor's
            f"/user/{alice}/formgrader": 404,  # not on a student's server at all
            f"/user/{alice}/formgrader/api/assignments": 404,
            f"/user/{alice}/files/..%2F{instructor}%2Fcourse%2Fnbgrader_config.py": 403,  # the course
            f"/user/{alice}/api/contents/..%2F{instructor}%2Fcourse": 404,
        }
        got = {}
        for number, url in enumerate(refusals):
            response = page.goto(hub["url"] + url)
            got[url] = response.status
            if SCREENSHOTS:
                page.screenshot(path=str(ARTIFACTS / f"{steps.count:02d}_refused_{number}.png"))
            assert page.locator(".jp-LabShell").count() == 0, url
            assert "Manage Assignments" not in page.content() and "c.CourseDirectory" not in page.content(), url
        assert got == refusals, got
        student = users[alice]
        probe = student.python(f"import os\ntry:\n    os.listdir({str(course)!r})\n    print('ALLOWED')\n"
                               "except PermissionError:\n    print('denied')")
        assert probe.stdout.strip() == "denied"


def test_13_hub_restarts_mid_class(scenario):
    hub, browser, server, users, instructor, alice, bob, course, answers, edition, index, steps, pages = scenario.all()
    with steps.step("hub_restarts_mid_class"):
        started = time.time()
        token = scenario.token = api_token(pages[alice], hub, alice)
        status, sessions = api(hub, token, "GET", f"/user/{alice}/api/sessions")
        assert status == 200, status
        [kernel] = [s["kernel"]["id"] for s in sessions if s["path"] == f"{edition[alice]}/{NOTEBOOK}"]
        scenario.kernel = kernel  # her notebook's, running since step 4
        assert run_code(hub, token, alice, kernel, "answer = 41\nprint('set')").strip() == "set"
        # her kernel's torch fits her CPU quota (one core: make hub's default), its threads never spin; her lab runs
        # the class's setting and would load its first two stages from the class's cache, which make hub fills
        fits = run_code(hub, token, alice, kernel, THREADS).split()
        assert fits[:4] == ["1", "1", "PASSIVE", LAB_SETTING], fits
        scenario.lab_cache_file = Path(fits[4])
        # her kernel binds no TCP port (her server's Landlock domain): she cannot hold the ports the class's servers
        # and the proxy need (rlhf_course/classroom/tcp_binds.py)
        if bind_rules_supported():
            assert run_code(hub, token, alice, kernel, BIND_ANY_PORT).strip() == "refused"
        assert scenario.lab_cache_file.parent == Path(hub["homes"][alice]).parents[1] / "lab-cache"
        before = servers_and_kernels(users, (instructor, alice, bob))
        assert sum("jupyterhub.singleuser" in cmd for cmd in before.values()) == 3, before
        assert any(f"/run/rlhf-classroom/{alice}/" in cmd for cmd in before.values()), before  # her kernel
        [old_culler] = cullers(hub)
        hub_pid = int((hub["hub_dir"] / "jupyterhub.pid").read_text())
        os.kill(hub_pid, signal.SIGTERM)  # the hub stops (as in a crash or an upgrade); the classroom starts it again
        # promptly: the hub stops its culler with SIGINT, and a culler deaf to it costs JupyterHub's 30 s interrupt_timeout
        wait_for("the old hub's exit", lambda: not Path(f"/proc/{hub_pid}").exists(), 20, every=0.1)
        # meanwhile her server answers through the proxy (which outlives the hub)
        status, _ = api(hub, token, "GET", f"/user/{alice}/api/kernels/{kernel}")
        assert status == 200, status
        wait_for("a new hub", lambda: int((hub["hub_dir"] / "jupyterhub.pid").read_text()) != hub_pid, 60)
        wait_for("the new hub's answer", lambda: urllib.request.urlopen(hub["url"] + "/hub/health", timeout=5), 120)
        assert her_server(hub, token, alice)["ready"]  # the new hub found her server
        assert servers_and_kernels(users, (instructor, alice, bob)) == before  # the same servers and kernels
        assert run_code(hub, token, alice, kernel, "print(answer + 1)").strip() == "42"  # nothing lost
        # the new hub's culler replaced the old hub's (a hub stopped by a signal may leave its service behind)
        wait_for("the new hub's culler, alone", lambda: len(now := cullers(hub)) == 1 and old_culler not in now, 60)
        hub["log"].seek(0)
        assert "starting it again" in hub["log"].read()
        print(f"restart: {time.time() - started:.0f} s")


def test_14_idle_server_culled_files_kept(scenario):
    hub, browser, server, users, instructor, alice, bob, course, answers, edition, index, steps, pages = scenario.all()
    with steps.step("idle_server_culled_files_kept"):
        token, uid, started = scenario.token, users[alice].uid, time.time()
        for page in list(pages.values()):  # the class is over: everyone closes their browser
            page.context.close()
        pages.clear()
        closed = time.time()
        status, _ = api(hub, token, "PUT", f"/user/{alice}/api/contents/notes.txt",
                        {"type": "file", "format": "text", "content": "kept across an idle stop"})
        assert status in (200, 201), status
        assert processes(uid)
        # The classroom's culler: the hub's service, with make hub's idle time (an hour) and its token's scopes.
        # The same command, environment and token, run with an idle time of IDLE seconds, stops her server.
        from jupyterhub_idle_culler import IdleCuller
        [(pid, argv)] = cullers(hub).items()
        configured = IdleCuller()
        configured.parse_command_line(argv[3:])
        assert (configured.timeout, configured.cull_every, configured.cull_users) == (IDLE_TIMEOUT, 60, False), argv
        environ = dict(item.split("=", 1) for item in
                       Path(f"/proc/{pid}/environ").read_text().split("\0") if "=" in item)
        assert environ["JUPYTERHUB_SERVICE_NAME"] == "idle-culler", environ.keys()
        idle_since = time.time()  # her last activity the hub hears of, now:
        now = datetime.datetime.now(datetime.timezone.utc).isoformat()
        assert api(hub, token, "POST", f"/hub/api/users/{alice}/activity",
                   {"last_activity": now, "servers": {"": {"last_activity": now}}})[0] == 200
        culler = subprocess.Popen([*argv[:3], f"--timeout={IDLE}", "--cull-every=1"], env=environ,
                                  cwd=hub["hub_dir"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        try:
            wait_for("the idle culler", lambda: her_server(hub, token, alice) is None, IDLE + 60, every=0.5)
            culled = time.time()
        finally:
            culler.terminate()
            said = culler.communicate(timeout=30)[0]
        assert culled - idle_since >= IDLE - 1, said[-3000:]  # not before the idle time
        assert f"Culling server {alice} (inactive for" in said, said[-3000:]  # the culler stopped it
        wait_for("her processes' exit", lambda: not processes(uid), 30)  # server and kernels gone: memory returned
        gone = time.time()
        assert (users[alice].home / "notes.txt").read_text() == "kept across an idle stop"
        start_server(hub, token, alice)  # her next login
        status, notes = api(hub, token, "GET", f"/user/{alice}/api/contents/notes.txt")
        assert status == 200 and notes["content"] == "kept across an idle stop"
        print(f"browsers closed in {closed - started:.1f} s; culled after {culled - idle_since:.1f} s idle; her "
              f"processes gone {gone - culled:.1f} s later; her server back in {time.time() - gone:.1f} s")


def test_15_the_lab_cache_is_the_one_her_lab_reads(scenario):
    """make hub trained the lab's first two stages for the class, under the name her kernel computed (step 13): the
    same code, setting (the class's, HUB_LAB_SETTING) and thread count; the file is root's and she may only read it."""
    hub, browser, server, users, instructor, alice, bob, course, answers, edition, index, steps, pages = scenario.all()
    with steps.step("the_lab_cache_is_the_one_her_lab_reads"):
        path = wait_for("the class's lab cache",
                        lambda: scenario.lab_cache_file.is_file() and scenario.lab_cache_file, 300, every=1)
        assert path.stat().st_uid == 0 and path.stat().st_mode & 0o777 == 0o644
        assert path.parent.stat().st_uid == 0 and path.parent.stat().st_mode & 0o777 == 0o755


def test_make_hub_trains_the_quick_labs_unless_told(tmp_path):
    """No hub: make hub's class trains and runs the quick lab unless HUB_LAB_SETTING says otherwise (the scenario's
    hub, told smoke, trained for real above); its servers' labs read the setting it trains for."""
    from rlhf_course.classroom.hub import Classroom, argument_parser
    assert argument_parser().parse_args(["--proxy", "/bin/true"]).lab_setting == "quick"
    assert argument_parser().parse_args(["--proxy", "/bin/true", "--lab-setting", "full"]).lab_setting == "full"
    for setting in ("quick", LAB_SETTING):
        room = Classroom(tmp_path, tmp_path / "base", "p_", ["a"], 1, Path("/bin/true"),
                         **({} if setting == "quick" else {"lab_setting": setting}))
        room.server = ServerEnv.__new__(ServerEnv)
        room.server.python, room.server.path = sys.executable, os.environ["PATH"]
        room.course_id, room.passwords, room.hub_dir = "c", {name: "p" for name in room.names}, tmp_path
        command = room.lab_cache_command()
        assert command[command.index("--setting") + 1] == setting, command
        room.write_hub_config()
        environments = json.loads((tmp_path / "users.json").read_text())["environments"]
        assert {env["RLHF_LAB_SETTING"] for env in environments.values()} == {setting}
