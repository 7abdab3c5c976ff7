"""The classroom through a class (issue #37), on one small hub (`python -m rlhf_course.classroom`, `make hub`'s
command, with one student and a short idle time; no browser: the student's REST calls, with her own token):

1. the hub restarts mid-class: while it is down her server still answers through the proxy, and after it her
   server and kernel are the same processes, the kernel's variables intact, reached through the new hub;
   Her kernel's torch fits her CPU quota (one thread, OMP_WAIT_POLICY=PASSIVE);
2. her server idle for the idle time is stopped by jupyterhub-idle-culler: none of her processes is left (their
   memory returned), her files stay, and her next start resumes with them;
3. the lab's SFT policy and reward model, trained once for the class by make hub, are where her lab looks.

Needs root (accounts, setuid spawning) and npm (the proxy).  About a minute: the hub's start, then the idle time.
"""
import contextlib
import datetime
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
import uuid
from pathlib import Path

import pytest

from rlhf_course.classroom.hub import free_port

pytestmark = pytest.mark.slow
PREFIX = f"rlhfs{os.getpid() % 1000}_"  # per run: two checkouts may run this test at once
IDLE = 20  # seconds: the culler's idle time on this hub (longer than the hub's restart, which the student spans)


def _needs():
    problems = [tool for tool in ("setpriv", "useradd", "npm", "node") if not shutil.which(tool)]
    if os.geteuid() != 0:
        problems.insert(0, "root")
    if problems:
        message = "the hub test needs " + ", ".join(problems)
        pytest.fail(message) if os.environ.get("CI") else pytest.skip(message)


@pytest.fixture(scope="module")
def hub(repo):
    """The classroom's own command on a free port, one student, idle time IDLE; stopped (accounts removed) after."""
    _needs()
    proxy = repo / ".cache" / "hub-proxy" / "node_modules" / ".bin" / "configurable-http-proxy"
    subprocess.run(["make", "--no-print-directory", "-C", str(repo), str(proxy.relative_to(repo))], check=True,
                   capture_output=True)
    scratch = Path(tempfile.mkdtemp(prefix="rlhf-hub-survives-"))  # users traverse it: not pytest's 0700 folder
    scratch.chmod(0o755)
    base = scratch / "classroom"
    log = open(scratch / "classroom.log", "w+")
    process = subprocess.Popen(
        [sys.executable, "-m", "rlhf_course.classroom", "--proxy", str(proxy), "--port", str(free_port()),
         "--base", str(base), "--prefix", PREFIX, "--students", "dana", "--make-checkout-private",
         "--idle-timeout", str(IDLE)],
        cwd=repo, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    started = time.time()
    try:
        while not (base / "hub" / "ready").exists():
            if process.poll() is not None or time.time() - started > 600:
                log.seek(0)
                raise AssertionError(f"the classroom did not start:\n{log.read()[-5000:]}")
            time.sleep(0.5)
        print(f"classroom ready in {time.time() - started:.0f} s")
        accounts = json.loads((base / "hub" / "accounts.json").read_text())
        [student] = accounts["students"]
        token = subprocess.run(  # the student's own API token, as she would make one on the hub's token page
            [accounts["python"], "-m", "jupyterhub", "token", "-f", str(base / "hub" / "jupyterhub_config.py"),
             student], cwd=base / "hub", capture_output=True, text=True, check=True).stdout.split()[-1]
        yield {**accounts, "student": student, "token": token, "hub_dir": base / "hub", "log": log}
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGTERM)
        process.wait(timeout=90)
        log.close()
        shutil.rmtree(scratch, ignore_errors=True)


def api(hub, method: str, path: str, body=None, timeout: float = 30):
    """The student's REST call through the proxy: (status, parsed JSON or None)."""
    request = urllib.request.Request(hub["url"] + path, method=method,
                                     data=None if body is None else json.dumps(body).encode(),
                                     headers={"Authorization": f"token {hub['token']}"})
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


def her_server(hub) -> dict | None:
    """Her server as the hub has it (``ready``, ``pending``...), or None when she has none."""
    status, user = api(hub, "GET", f"/hub/api/users/{hub['student']}")
    assert status == 200, status
    return user["servers"].get("")


def start_server(hub) -> None:
    """As her login does: start her server unless it runs; back when it is ready."""
    if not (her_server(hub) or {}).get("ready"):
        status, _ = api(hub, "POST", f"/hub/api/users/{hub['student']}/server")
        assert status in (201, 202), status
    wait_for("her server", lambda: (her_server(hub) or {}).get("ready"), 120)


def processes(uid: int) -> dict[int, str]:
    found = {}
    for entry in Path("/proc").iterdir():
        with contextlib.suppress(OSError):
            if entry.name.isdigit() and entry.stat().st_uid == uid:
                found[int(entry.name)] = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
    return found


def run_code(hub, kernel: str, code: str) -> str:
    """Run ``code`` in the kernel over its websocket (as JupyterLab does); its printed output."""
    from tornado.httpclient import HTTPRequest
    from tornado.ioloop import IOLoop
    from tornado.websocket import websocket_connect

    async def run():
        url = hub["url"].replace("http", "ws") + f"/user/{hub['student']}/api/kernels/{kernel}/channels"
        connection = await websocket_connect(HTTPRequest(url, headers={"Authorization": f"token {hub['token']}"}))
        msg_id = uuid.uuid4().hex
        connection.write_message(json.dumps({
            "header": {"msg_id": msg_id, "msg_type": "execute_request", "session": uuid.uuid4().hex,
                       "username": hub["student"], "version": "5.3", "date": datetime.datetime.now().isoformat()},
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

    return IOLoop.current().run_sync(run, timeout=60)


THREADS = """import os, torch
from rlhf_course.lab import shared_stages, threads, train
print(torch.get_num_threads(), threads.lab_threads(), os.environ["OMP_WAIT_POLICY"],
      shared_stages.cache_file(train.LabConfig.setting("quick"), threads.lab_threads()))
"""  # torch's own thread count (from OMP_NUM_THREADS), the lab's, the wait policy, the lab's cache file


class Working:
    """The student at work: her server reports activity to the hub every second, as a server in use does."""

    def __init__(self, hub):
        self.hub, self.stopping = hub, threading.Event()
        self.thread = threading.Thread(target=self.report, daemon=True)

    def report(self):
        while not self.stopping.wait(1):
            now = datetime.datetime.now(datetime.timezone.utc).isoformat()
            with contextlib.suppress(OSError):  # the hub may be restarting
                api(self.hub, "POST", f"/hub/api/users/{self.hub['student']}/activity",
                    {"last_activity": now, "servers": {"": {"last_activity": now}}}, timeout=5)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.stopping.set()
        self.thread.join()


def test_hub_restarts_mid_class(hub):
    student, started = hub["student"], time.time()
    uid = int(subprocess.run(["id", "-u", student], capture_output=True, text=True, check=True).stdout)
    with Working(hub):
        start_server(hub)
        status, kernel = api(hub, "POST", f"/user/{student}/api/kernels", {"name": "python3"})
        assert status == 201, status
        assert run_code(hub, kernel["id"], "answer = 41\nprint('set')").strip() == "set"
        # her kernel's torch fits her CPU quota (one core: make hub's default), its threads never spin; the lab
        # would load its first two stages from the class's cache, which make hub fills meanwhile
        fits = run_code(hub, kernel["id"], THREADS).split()
        assert fits[:3] == ["1", "1", "PASSIVE"], fits
        hub["lab_cache_file"] = Path(fits[3])
        assert hub["lab_cache_file"].parent == Path(hub["homes"][student]).parents[1] / "lab-cache"
        before = {pid: cmd for pid, cmd in processes(uid).items() if "singleuser" in cmd or "ipykernel" in cmd}
        assert len(before) == 2, before
        hub_pid = int((hub["hub_dir"] / "jupyterhub.pid").read_text())
        os.kill(hub_pid, signal.SIGTERM)  # the hub stops (as in a crash or an upgrade); the classroom starts it again
        wait_for("the old hub's exit", lambda: not Path(f"/proc/{hub_pid}").exists(), 60, every=0.1)
        # meanwhile her server answers through the proxy (which outlives the hub)
        status, _ = api(hub, "GET", f"/user/{student}/api/kernels/{kernel['id']}")
        assert status == 200, status
        wait_for("a new hub", lambda: int((hub["hub_dir"] / "jupyterhub.pid").read_text()) != hub_pid, 60)
        wait_for("the new hub's answer", lambda: urllib.request.urlopen(hub["url"] + "/hub/health", timeout=5), 120)
        assert her_server(hub)["ready"]  # the new hub found her server
        after = {pid: cmd for pid, cmd in processes(uid).items() if "singleuser" in cmd or "ipykernel" in cmd}
        assert after == before  # the same server and kernel processes
        assert run_code(hub, kernel["id"], "print(answer + 1)").strip() == "42"  # nothing lost
    hub["log"].seek(0)
    assert "starting it again" in hub["log"].read()
    print(f"restart: {time.time() - started:.0f} s")


def test_idle_server_culled_files_kept(hub):
    student = hub["student"]
    uid = int(subprocess.run(["id", "-u", student], capture_output=True, text=True, check=True).stdout)
    start_server(hub)  # running since the test before, or started now
    status, _ = api(hub, "PUT", f"/user/{student}/api/contents/notes.txt",
                    {"type": "file", "format": "text", "content": "kept across an idle stop"})
    assert status in (200, 201), status
    assert processes(uid)
    idle_since = time.time()  # her last activity the hub hears of, now:
    now = datetime.datetime.now(datetime.timezone.utc).isoformat()
    assert api(hub, "POST", f"/hub/api/users/{student}/activity",
               {"last_activity": now, "servers": {"": {"last_activity": now}}})[0] == 200
    wait_for("the idle culler", lambda: her_server(hub) is None, IDLE + 60, every=1)  # idle time + its checks
    culled = time.time()
    assert culled - idle_since >= IDLE - 1  # not before the idle time
    wait_for("her processes' exit", lambda: not processes(uid), 30)  # server and kernels gone: memory returned
    home = Path(hub["homes"][student])
    assert (home / "notes.txt").read_text() == "kept across an idle stop"
    start_server(hub)  # her next login
    status, notes = api(hub, "GET", f"/user/{student}/api/contents/notes.txt")
    assert status == 200 and notes["content"] == "kept across an idle stop"
    print(f"culled after {culled - idle_since:.0f} s idle")


def test_the_lab_cache_is_the_one_her_lab_reads(hub):
    """make hub trained the lab's first two stages for the class, under the name her kernel computed: the same
    code, settings and thread count; the file is root's and she may only read it."""
    path = wait_for("the class's lab cache", lambda: hub["lab_cache_file"].is_file() and hub["lab_cache_file"],
                    300, every=1)
    assert path.stat().st_uid == 0 and path.stat().st_mode & 0o777 == 0o644
    assert path.parent.stat().st_uid == 0 and path.parent.stat().st_mode & 0o777 == 0o755
