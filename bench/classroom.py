"""A class on `make hub` (issue #37, items 1 and 3): N simulated students, each driving their own JupyterLab
server and kernel over HTTP and the kernel websocket as JupyterLab does, while the machine's load is recorded.

    sudo .venv/bin/python bench/classroom.py --quick                       # 2 students, short pauses: a smoke run
    sudo .venv/bin/python bench/classroom.py --students 40 --scenario lab --arrival-minutes 5
    sudo .venv/bin/python bench/classroom.py --students 40 --scenario lab --pace brisk --prestart --warm-kernels
    sudo .venv/bin/python bench/classroom.py --students 30 --scenario burst
    sudo .venv/bin/python bench/classroom.py --students 5 --with-neighbours   # item 3: the class twice, without
                                                                             # and with four hostile neighbours

Each student logs in to the hub (its login form), starts their server (``/hub/spawn``) and opens JupyterLab,
fetches ``rlhf`` from the Assignment List (nbgrader's ``/assignments/fetch``), opens the notebook (a session and
its kernel, ``/api/sessions``), runs its code cells one at a time over the kernel's websocket (``execute_request``
as JupyterLab sends it) with the reference answers typed into the answer cells (``source/``: the harness runs as
root), saves it (``PUT /api/contents``), Validates (``/assignments/validate``) and Submits (``/assignments/submit``).

    lab     students arrive over --arrival-minutes (uniform, seeded), pause before each cell (seeded; --pause-scale
            scales every pause), run the training cell (``lab_run``) when they reach it, Validate and Submit.
            ``--pace people`` (the default): a person's pauses, median 4 s, 30 s at an answer cell (log-normal);
            ``--pace brisk``: uniform 4-12 s before every cell (the whole notebook in about ten minutes);
    burst   everyone logs in at once and runs all cells without a pause; then everyone Submits in the same
            second while the instructor collects.

--prestart: before the class (after the student alone), the instructor starts the class's servers
(``python -m rlhf_course.classroom prestart``), timed and reported apart; the class begins once the servers'
processes are quiet (their cgroups under 0.1 core), so the students find their servers running.  --warm-kernels:
``make hub HUB_WARM_KERNELS=1``, each student's server keeps a kernel with the notebook's imports done for the first
notebook (rlhf_course/classroom/warm_kernels.py).  ``bench/cell_cpu.py`` gives each cell's CPU alone.

Before the class, one student runs the notebook alone: the training cell's time alone.  After it, the instructor
collects (``nbgrader collect rlhf``) and the submissions collected are counted.

Figures (a table, and JSON with --json): spawn seconds; cell latency (request to the kernel's idle, the training
cell apart), p50/p95; training seconds against alone; Validate seconds and failures; the kernel's CPU seconds per
notebook (its own and its children's, read in the kernel at the end); memory per student (their cgroup's peak:
server, kernel and Validate together; their sum overstates the machine's, a library's pages counting once on the
machine), and the machine's simultaneous peak (memory in use, sampled once a second while the class runs, against
what was in use before the hub started: its share of the machine, a student's cost, how many students fit within
75 %); the hub API's latency (``GET /hub/api/user`` once a second), p50/p95;
failures (every failure a student saw: an error on the way, or a Validate that did not pass even if they submitted
anyway); submissions collected; the load average at the start, its peak and at the end; and the host's speed
(bench/host_speed.py's gauge) before and after the run: a run's figures mean little without the hour's speed.

--with-neighbours (item 3) runs the class twice on one hub: alone, then beside four neighbours started first,
each from their own kernel: a CPU spinner (two busy threads), a memory hog (allocating until its cgroup stops it),
a fork bomb (until its process limit), a disk filler (64 MiB files up to --disk-fill-mib; the file-size limit
is per file); the class's p95 cell latency with them over without (target <= 1.5x), and whether any student lost
a submission or failed.  The disk filler's files are removed with its account.

Everything the run made (the hub, every server, the accounts and their homes, the scratch folder) is removed at
the end, on Ctrl-C or SIGTERM too (``make hub`` does it when it is stopped).  Needs root, npm, chromium is not
needed.  The machine is shared: read the figures with the load average beside them.
"""
from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import json
import math
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

ASSIGNMENT, NOTEBOOK = "rlhf", "rlhf_building_blocks.ipynb"
TRAINING_CELL = "lab_run"
PREFIX = "rlhfcr_"
NEIGHBOURS = ("spinner", "hog", "forkbomb", "diskfill")


# ----------------------------------------------------------------------------- pure parts (tested)

def percentile(values: list[float], q: float) -> float:
    """The q-th percentile (0..100) by linear interpolation between closest ranks; nan for no values."""
    if not values:
        return math.nan
    ordered = sorted(values)
    rank = (len(ordered) - 1) * q / 100
    low, high = math.floor(rank), math.ceil(rank)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def arrivals(students: list[str], minutes: float, seed: int) -> dict[str, float]:
    """Student -> seconds after the start at which they arrive: uniform over ``minutes`` (seeded)."""
    rng = random.Random(f"arrivals:{seed}")
    return {s: rng.uniform(0, minutes * 60) for s in students}


PACES = ("people", "brisk")
BRISK_PAUSE_S = (4.0, 12.0)  # the brisk pace: a pause drawn uniformly in this range before every cell


def pauses(student: str, cells: list[tuple[str, bool]], seed: int, scale: float, pace: str = "people") -> list[float]:
    """Seconds a student pauses before each code cell, seeded per student, all scaled by ``scale``.  ``people``:
    reading and running a cell, median 4 s; typing an answer cell, median 30 s (log-normal).  ``brisk``: uniform
    over BRISK_PAUSE_S before every cell, the answers pasted (the whole notebook in about ten minutes).
    ``cells``: (grade id, is an answer cell) per code cell."""
    rng = random.Random(f"pauses:{seed}:{student}")
    if pace == "brisk":
        return [scale * rng.uniform(*BRISK_PAUSE_S) for _ in cells]
    if pace != "people":
        raise ValueError(f"no pace {pace!r}; known: {', '.join(PACES)}")
    return [scale * rng.lognormvariate(math.log(30.0 if answer else 4.0), 0.5) for _, answer in cells]


@dataclass
class StudentFigures:
    """What one simulated student measured (seconds unless said)."""
    name: str
    spawn: float = math.nan
    cells: list[float] = field(default_factory=list)        # latency of each cell but the training cell
    training: float = math.nan
    training_wait: float = 0.0                               # of it, waiting for a training slot (its own words)
    training_at: float = math.nan                            # when it was run, seconds after the class began
    validate: float = math.nan
    validate_ok: bool = False
    validate_problem: str = ""
    submitted: bool = False
    cpu_seconds: float = math.nan                            # the kernel's, itself and its children
    memory_mib: float = math.nan                             # the cgroup's peak
    failure: str = ""


def summarise(students: list[StudentFigures], hub_latencies: list[float], alone_training: float,
              collected: int, loads: list[tuple[float, float, float]], slots: int = 2) -> dict:
    """The run's figures from each student's (JSON-ready; nan where nothing was measured).  ``slots``: trainings the
    queue runs at once (the machine's cores without a queue), for the queue's own bound beside the measured p95."""
    cells = [c for s in students for c in s.cells]
    spawn = [s.spawn for s in students if not math.isnan(s.spawn)]
    training = [s.training for s in students if not math.isnan(s.training)]
    trained = [s.training - s.training_wait for s in students if not math.isnan(s.training)]
    waits = [s.training_wait for s in students if not math.isnan(s.training)]
    validate = [s.validate for s in students if not math.isnan(s.validate)]
    cpu = [s.cpu_seconds for s in students if not math.isnan(s.cpu_seconds)]
    memory = [s.memory_mib for s in students if not math.isnan(s.memory_mib)]
    return {
        "students": len(students),
        "spawn_s": {"p50": percentile(spawn, 50), "p95": percentile(spawn, 95), "max": max(spawn, default=math.nan)},
        "cell_latency_s": {"p50": percentile(cells, 50), "p95": percentile(cells, 95), "max": max(cells, default=math.nan),
                           "count": len(cells)},
        "training_s": {"alone": alone_training, "p50": percentile(training, 50), "p95": percentile(training, 95),
                       "max": max(training, default=math.nan),
                       "p50_over_alone": percentile(training, 50) / alone_training if alone_training else math.nan,
                       "p95_over_alone": percentile(training, 95) / alone_training if alone_training else math.nan,
                       "waiting_p50": percentile(waits, 50), "waiting_p95": percentile(waits, 95),
                       "training_p50": percentile(trained, 50), "training_p95": percentile(trained, 95)},
        "training_bound": queue_bound(students, alone_training, slots),
        "validate_s": {"p50": percentile(validate, 50), "max": max(validate, default=math.nan)},
        "validate_failures": sum(1 for s in students if not s.validate_ok),
        "cpu_s_per_notebook": {"p50": percentile(cpu, 50), "max": max(cpu, default=math.nan)},
        "memory_mib_per_student": {"p50": percentile(memory, 50), "max": max(memory, default=math.nan)},
        "hub_api_latency_s": {"p50": percentile(hub_latencies, 50), "p95": percentile(hub_latencies, 95),
                              "max": max(hub_latencies, default=math.nan), "count": len(hub_latencies)},
        "failures": failures_seen(students),
        "submitted": sum(s.submitted for s in students),
        "collected": collected,
        "load": {"start": loads[0] if loads else None, "peak_1min": max((l[0] for l in loads), default=math.nan),
                 "end": loads[-1] if loads else None},
    }


def queue_bound(students: list[StudentFigures], alone_training: float, slots: int) -> dict:
    """What a perfect queue gives these arrivals: each training ``alone_training`` seconds on a core of its own,
    ``slots`` at a time, first come first served (bench/training_bound.py's replay), p50 / p95 over alone; and the
    measured p95 over that bound (the goal: within 1.5x)."""
    from bench.training_bound import replay  # that module reads this one's percentile
    arrivals = [s.training_at for s in students if not math.isnan(s.training_at)]
    measured = [s.training for s in students if not math.isnan(s.training)]
    if not arrivals or not alone_training or not slots:
        return {"slots": slots, "p50_over_alone": math.nan, "p95_over_alone": math.nan, "measured_over_bound": math.nan}
    ideal = [t / alone_training for t in replay(arrivals, alone_training, cores=slots)]
    bound_p95 = percentile(ideal, 95)
    return {"slots": slots, "p50_over_alone": percentile(ideal, 50), "p95_over_alone": bound_p95,
            "measured_over_bound": percentile(measured, 95) / alone_training / bound_p95}


def failures_seen(students: list[StudentFigures]) -> dict[str, str]:
    """Student -> the failure they saw: an error on the way, or a Validate that did not pass (even if they
    submitted afterwards: a student told their correct notebook fails has seen a failure)."""
    seen = {}
    for s in students:
        if s.failure:
            seen[s.name] = s.failure
        elif not math.isnan(s.validate) and not s.validate_ok:
            seen[s.name] = f"Validate did not pass: {s.validate_problem}"[:400]
    return seen


def isolation(without: dict, with_neighbours: dict) -> dict:
    """Item 3's verdict: p95 cell latency with the neighbours over without (target <= 1.5), nothing lost."""
    ratio = with_neighbours["cell_latency_s"]["p95"] / without["cell_latency_s"]["p95"]
    lost = with_neighbours["students"] - with_neighbours["collected"]
    return {"p95_ratio": ratio, "within_1_5x": ratio <= 1.5, "lost_submissions": lost,
            "failures": with_neighbours["failures"], "ok": ratio <= 1.5 and lost == 0 and not with_neighbours["failures"]}


def memory_line(m: dict) -> str:
    """The class's memory peak in a sentence, with the goal beside it."""
    return (f"memory: the machine's peak in use {m['peak_mib'] / 1024:.1f} of {m['total_mib'] / 1024:.1f} GiB "
            f"({100 * m['peak_share']:.0f} %; goal <= {100 * m['goal_share']:.0f} %), {m['before_hub_mib'] / 1024:.1f} GiB "
            f"before the hub; {m['per_student_mib']:.0f} MiB a student (all the hub added, over the class): "
            f"{m['students_within_goal']} students within the goal")


def table(name: str, f: dict) -> str:
    def s(x):
        return "-" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.2f}"
    load = f["load"]
    rows = [
        ("students", str(f["students"])),
        ("spawn s (p50 / p95 / max)", f"{s(f['spawn_s']['p50'])} / {s(f['spawn_s']['p95'])} / {s(f['spawn_s']['max'])}"),
        ("cell latency s, training apart (p50 / p95 / max)",
         f"{s(f['cell_latency_s']['p50'])} / {s(f['cell_latency_s']['p95'])} / {s(f['cell_latency_s']['max'])}"
         f"  ({f['cell_latency_s']['count']} cells)"),
        ("training s (alone / p50 / p95 / max; p50, p95 over alone)",
         f"{s(f['training_s']['alone'])} / {s(f['training_s']['p50'])} / {s(f['training_s']['p95'])} / "
         f"{s(f['training_s']['max'])}; {s(f['training_s']['p50_over_alone'])}x, {s(f['training_s']['p95_over_alone'])}x"),
        ("the queue's own bound: a perfect queue of K, p50 / p95 over alone; measured p95 over it",
         f"K={f['training_bound']['slots']}: {s(f['training_bound']['p50_over_alone'])}x / "
         f"{s(f['training_bound']['p95_over_alone'])}x; {s(f['training_bound']['measured_over_bound'])}x (goal <= 1.5x)"),
        ("of it, waiting for a slot / training (p50, p95)",
         f"{s(f['training_s']['waiting_p50'])}, {s(f['training_s']['waiting_p95'])} / "
         f"{s(f['training_s']['training_p50'])}, {s(f['training_s']['training_p95'])}"),
        ("Validate s (p50 / max), failures", f"{s(f['validate_s']['p50'])} / {s(f['validate_s']['max'])}, "
                                            f"{f['validate_failures']}"),
        ("kernel CPU s per notebook (p50 / max)", f"{s(f['cpu_s_per_notebook']['p50'])} / {s(f['cpu_s_per_notebook']['max'])}"),
        ("memory MiB per student, cgroup peak (p50 / max)",
         f"{s(f['memory_mib_per_student']['p50'])} / {s(f['memory_mib_per_student']['max'])}"),
        ("hub API latency s (p50 / p95 / max)",
         f"{s(f['hub_api_latency_s']['p50'])} / {s(f['hub_api_latency_s']['p95'])} / {s(f['hub_api_latency_s']['max'])}"),
        ("failures", str(len(f["failures"])) + (f" {f['failures']}" if f["failures"] else "")),
        ("submitted / collected", f"{f['submitted']} / {f['collected']}"),
        ("load average (start; peak 1 min; end)",
         f"{' '.join(f'{x:.2f}' for x in load['start'] or ())}; {s(load['peak_1min'])}; "
         f"{' '.join(f'{x:.2f}' for x in load['end'] or ())}"),
    ]
    width = max(len(r[0]) for r in rows)
    return "\n".join([name] + [f"  {label:<{width}}  {value}" for label, value in rows])


# ----------------------------------------------------------------------------- the run (root)

RUN_LOCK = Path("/run/lock/rlhf-bench-classroom.lock")


def one_class_at_a_time(path: Path = RUN_LOCK, say=print):
    """Take the machine's lock of this bench (an open file, held until it is closed or the process ends), waiting
    for another run to end first: every run makes and removes the same accounts (``rlhfcr_*``), so a run started
    beside another removed the other's accounts at its start or end (2026-12-06: a burst run lost
    ``rlhfcr_instructor`` to a lab run's clean-up), and two classes on one machine measure each other anyway."""
    import fcntl
    path.parent.mkdir(parents=True, exist_ok=True)
    lock = open(path, "a+")
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        lock.seek(0)
        say(f"another bench/classroom.py run holds {path} ({lock.read().strip() or 'pid unknown'}): waiting for it "
            f"to end")
        fcntl.flock(lock, fcntl.LOCK_EX)
    lock.seek(0)
    lock.truncate()
    lock.write(f"pid {os.getpid()}, since {dt.datetime.now(dt.timezone.utc):%H:%M:%S} UTC\n")
    lock.flush()
    return lock


class Hub:
    """`make hub` on a free loopback port, its own folder and accounts; stopped (all removed) by :meth:`stop`."""

    def __init__(self, students: list[str], memory: str | None, make_variables: tuple[str, ...] = ()):
        from rlhf_course.classroom.hub import free_port
        self.scratch = Path(tempfile.mkdtemp(prefix="bench-classroom-"))
        self.scratch.chmod(0o755)
        self.base = self.scratch / "classroom"
        self.log = open(self.scratch / "make-hub.log", "w+")
        command = ["make", "--no-print-directory", "-C", str(REPO), "hub", f"HUB_PORT={free_port()}",
                   f"HUB_BASE={self.base}", f"HUB_PREFIX={PREFIX}", f"HUB_STUDENTS={' '.join(students)}",
                   "HUB_MAKE_PRIVATE=1"] + ([f"HUB_MEMORY={memory}"] if memory else []) + list(make_variables)
        self.process = subprocess.Popen(command, stdout=self.log, stderr=subprocess.STDOUT, start_new_session=True)

    def wait_ready(self, timeout: float = 900) -> dict:
        started = time.time()
        while not (self.base / "hub" / "ready").exists():
            if self.process.poll() is not None or time.time() - started > timeout:
                self.log.seek(0)
                raise RuntimeError(f"make hub did not start:\n{self.log.read()[-4000:]}")
            time.sleep(0.5)
        return json.loads((self.base / "hub" / "accounts.json").read_text())

    def wait_prestarted(self, timeout: float = 1800) -> dict:
        """Wait for make hub's background start of every server (HUB_CLASS lab or burst), then for its processes
        to be quiet; what it said and the seconds from the hub's ready to its end."""
        began = time.time()
        while not (self.base / "hub" / "prestarted").exists():
            if self.process.poll() is not None or time.time() - began > timeout:
                raise RuntimeError("make hub's background start of the servers did not end")
            time.sleep(1)
        said = (self.base / "hub" / "prestarted").read_text().strip()
        accounts = json.loads((self.base / "hub" / "accounts.json").read_text())
        settled = wait_until_quiet(accounts["students"])
        return {"said": said.splitlines()[-2:], "seconds_after_ready": time.time() - began, "settled_after_s": settled}

    def stop(self, keep_logs: Path | None = None) -> None:
        """Stop it; with ``keep_logs``, the hub's, make hub's and every server's logs are copied there first
        (`<name>.jupyterhub.log`, `<name>.make-hub.log`, `<name>.servers/<user>.log`: the classroom removes its folder;
        a failed spawn's reason is in the hub's log, what the server said before it died in its own)."""
        if keep_logs is not None:
            from rlhf_course.classroom.prestart import SERVER_LOGS
            for log in (self.base / "hub" / "jupyterhub.log", self.scratch / "make-hub.log"):
                with contextlib.suppress(OSError):
                    shutil.copyfile(log, keep_logs.with_suffix(f".{log.name}"))
            with contextlib.suppress(OSError):
                shutil.copytree(self.base / "hub" / SERVER_LOGS, keep_logs.with_suffix(f".{SERVER_LOGS}"),
                                dirs_exist_ok=True)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGTERM)  # the classroom stops every server, removes the accounts
        try:
            self.process.wait(timeout=120)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()
        self.log.close()
        shutil.rmtree(self.scratch, ignore_errors=True)


def as_user(accounts: dict, name: str, *args: str, env: dict | None = None, cwd: str | None = None):
    """A command as one of the classroom's accounts, in the server's environment (as the hub's users run it)."""
    import pwd
    entry = pwd.getpwnam(name)
    home = accounts["homes"][name]
    environment = {"HOME": home, "USER": name, "PATH": accounts["path"], "LANG": "C.UTF-8", **(env or {})}
    command = ["setpriv", f"--reuid={entry.pw_uid}", f"--regid={entry.pw_gid}", "--init-groups",
               "env", "-i", *[f"{k}={v}" for k, v in environment.items()], *args]
    return subprocess.run(command, cwd=cwd or home, capture_output=True, text=True)


def instructor(accounts: dict, *args: str) -> subprocess.CompletedProcess:
    """nbgrader as the instructor, in the course, with the instructor's environment (the hub's)."""
    base = Path(accounts["exchange"]).parent
    env = {"RLHF_EXCHANGE_ROOT": accounts["exchange"], "JUPYTER_CONFIG_PATH": str(base / "jupyter" / "everyone")}
    proc = as_user(accounts, accounts["instructor"], accounts["python"], "-m", "nbgrader", *args, env=env,
                   cwd=accounts["course"])
    if proc.returncode:
        raise RuntimeError(f"nbgrader {' '.join(args)} failed:\n{proc.stdout[-2000:]}{proc.stderr[-2000:]}")
    return proc


class Session:
    """One user in the hub, as their browser: the hub's and their server's cookies, XSRF tokens, a kernel."""

    def __init__(self, url: str, name: str, password: str, timeout: float = 600):
        import requests
        self.url, self.name, self.password, self.timeout = url, name, password, timeout
        self.http = requests.Session()
        self.user_url = f"{url}/user/{name}"

    def _xsrf(self, path: str) -> str:
        for cookie in self.http.cookies:
            if cookie.name == "_xsrf" and path.startswith(cookie.path or "/"):
                return cookie.value
        return ""

    def login(self) -> None:
        self.http.get(f"{self.url}/hub/login", timeout=self.timeout).raise_for_status()
        reply = self.http.post(f"{self.url}/hub/login", data={"username": self.name, "password": self.password,
                                                             "_xsrf": self._xsrf("/hub/")}, timeout=self.timeout)
        reply.raise_for_status()
        if not any(c.name.startswith("jupyterhub-session") or c.name == "jupyterhub-hub-login" for c in self.http.cookies):
            raise RuntimeError(f"{self.name}: the hub refused the login")

    def spawn(self) -> float:
        """Start the server as the hub's page does, then open JupyterLab (its OAuth dance): seconds until the
        server's API answers."""
        started = time.perf_counter()
        self.http.get(f"{self.url}/hub/spawn/{self.name}", timeout=self.timeout)
        while True:
            reply = self.http.get(f"{self.user_url}/lab", timeout=self.timeout)
            if reply.status_code == 200 and "/user/" in reply.url and "jupyter-config-data" in reply.text:
                break
            if time.perf_counter() - started > 300:
                raise RuntimeError(f"{self.name}: no server after 300 s ({reply.status_code} {reply.url})")
            time.sleep(0.5)
        self.api("GET", "/api/status")
        return time.perf_counter() - started

    def api(self, method: str, path: str, **kwargs):
        headers = {"X-XSRFToken": self._xsrf(f"/user/{self.name}/")}
        reply = self.http.request(method, f"{self.user_url}{path}", headers=headers, timeout=self.timeout, **kwargs)
        if reply.status_code >= 400:
            raise RuntimeError(f"{self.name}: {method} {path}: {reply.status_code} {reply.text[:500]}")
        if not reply.content:
            return None
        try:
            return reply.json()
        except ValueError:  # e.g. a login page after a redirect: say where the class's failure came from
            raise RuntimeError(f"{self.name}: {method} {path}: {reply.status_code} from {reply.url}, not JSON: "
                               f"{reply.text[:200]!r}") from None

    def nbgrader(self, action: str, **data) -> dict:
        """nbgrader's lab handlers as the Assignment List and the Validate button call them."""
        path = "/assignments/validate" if action == "validate" else f"/assignments/{action}"
        return self.api("POST", path, data=data)


class Kernel:
    """A notebook's kernel over its websocket channel, messages as JupyterLab sends them (protocol 5.3, JSON)."""

    def __init__(self, session: Session, notebook_path: str):
        import websocket
        self.session = session
        reply = session.api("POST", "/api/sessions", json={"path": notebook_path, "type": "notebook",
                                                            "name": Path(notebook_path).name,
                                                            "kernel": {"name": "python3"}})
        self.session_id, self.kernel_id = reply["id"], reply["kernel"]["id"]
        self.client_session = uuid.uuid4().hex
        ws_url = session.user_url.replace("http://", "ws://") + \
            f"/api/kernels/{self.kernel_id}/channels?session_id={self.client_session}"
        cookie = "; ".join(f"{c.name}={c.value}" for c in session.http.cookies)
        self.ws = websocket.create_connection(ws_url, header=[f"Cookie: {cookie}"], origin=session.url,
                                              timeout=session.timeout)

    def execute(self, code: str, timeout: float = 900) -> tuple[float, list[str]]:
        """Seconds from the request to the kernel's idle after it, and the errors it raised."""
        msg_id = uuid.uuid4().hex
        message = {"header": {"msg_id": msg_id, "username": self.session.name, "session": self.client_session,
                              "msg_type": "execute_request", "version": "5.3",
                              "date": dt.datetime.now(dt.timezone.utc).isoformat()},
                   "parent_header": {}, "metadata": {}, "channel": "shell", "buffers": [],
                   "content": {"code": code, "silent": False, "store_history": True, "user_expressions": {},
                               "allow_stdin": False, "stop_on_error": True}}
        started = time.perf_counter()
        self.ws.send(json.dumps(message))
        errors, replied, idle, self.output = [], False, False, ""
        while not (replied and idle):
            if time.perf_counter() - started > timeout:
                raise RuntimeError(f"a cell ran longer than {timeout} s")
            raw = self.ws.recv()
            if not isinstance(raw, str):
                continue  # binary frames (buffers of widgets' comms)
            if not raw:  # websocket-client's answer to a close frame
                raise RuntimeError(f"{self.session.name}: the kernel's websocket was closed by the server "
                                   f"({self.ws.status}; kernel {self.kernel_id})")
            reply = json.loads(raw)
            if reply.get("parent_header", {}).get("msg_id") != msg_id:
                continue
            kind = reply["header"]["msg_type"]
            if kind == "error":
                errors.append(f"{reply['content']['ename']}: {reply['content']['evalue']}"[:300])
            elif kind == "stream":
                self.output += reply["content"]["text"]
            elif kind == "execute_reply":
                replied = True
            elif kind == "status" and reply["content"]["execution_state"] == "idle":
                idle = True
        return time.perf_counter() - started, errors

    def pause(self, seconds: float, stop: threading.Event) -> bool:
        """A person's pause before the next cell, the page open: :func:`keep_reading`.  True if the run stops."""
        return keep_reading(self.ws, seconds, stop, self.session.timeout)

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.ws.close()
        with contextlib.suppress(Exception):
            self.session.api("DELETE", f"/api/sessions/{self.session_id}")


def keep_reading(ws, seconds: float, stop: threading.Event, timeout: float) -> bool:
    """Wait ``seconds`` as a browser with the notebook open does: reading the kernel's websocket all along, which
    answers the server's pings (websocket-client answers a ping only inside ``recv``).  Jupyter Server pings
    every 30 s and closes a websocket whose last pong is more than 90 s old (``ws_ping_timeout``): a client
    that stopped reading for a pause of 86 s after a cell was cut off (s039 of the lab session of 40, both
    runs; a browser never is).  What arrives meanwhile (late output of an earlier cell) is dropped, as
    :meth:`Kernel.execute` drops what is not its cell's.  True if ``stop`` was set; raises if the server
    closed the websocket."""
    import websocket
    deadline = time.perf_counter() + seconds
    try:
        while not stop.is_set():
            left = deadline - time.perf_counter()
            if left <= 0:
                return False
            ws.settimeout(min(1.0, left))
            try:  # back at each ping too (answered by then), so the deadline holds whatever the pings' pace
                opcode, _ = ws.recv_data(control_frame=True)
            except websocket.WebSocketTimeoutException:
                continue
            if opcode == websocket.ABNF.OPCODE_CLOSE:
                raise RuntimeError(f"the kernel's websocket was closed by the server during a pause ({ws.status})")
        return True
    finally:
        ws.settimeout(timeout)


def slot_wait(output: str) -> float:
    """Seconds the training cell said it waited for a training slot (its line in either language; 0 if none)."""
    from rlhf_course.i18n import TABLES, t
    waited = 0.0
    for line in ("Got a training slot after {seconds:.0f} s: training now",
                 "The training queue has not moved for {still:.0f} s (you waited {seconds:.0f} s): training now "
                 "without a slot"):
        for language in ("en", *TABLES):
            said = re.escape(t(line, language=language, seconds=111111, still=222222))
            pattern = said.replace("111111", r"(\d+)").replace("222222", r"\d+")
            waited = max([waited, *map(float, re.findall(pattern, output))])
    return waited


CPU_PROBE = ("import os as _o; _t = _o.times(); "
             "print('CPU_SECONDS', _t.user + _t.system + _t.children_user + _t.children_system)")


def answered_notebook(release_nb: dict, answers: dict[str, str]) -> dict:
    """The fetched notebook with the answers typed into their cells (by grade id)."""
    for cell in release_nb["cells"]:
        grade_id = cell.get("metadata", {}).get("nbgrader", {}).get("grade_id")
        if grade_id in answers:
            cell["source"] = answers[grade_id]
    return release_nb


def user_cgroup_memory(name: str) -> float:
    """The peak memory of the user's cgroup (server, kernels, Validate), MiB (cgroup v2 or v1)."""
    from rlhf_course.classroom.spawner import CGROUP_NAME, CGROUP_ROOT
    for path in (CGROUP_ROOT / CGROUP_NAME / name / "memory.peak",
                 CGROUP_ROOT / "memory" / CGROUP_NAME / name / "memory.max_usage_in_bytes"):
        if path.is_file():
            return int(path.read_text()) / 2**20
    return math.nan


class Student:
    """One simulated student; ``run`` never raises: a failure is recorded in the figures."""

    def __init__(self, accounts: dict, name: str, answers: dict[str, str], course_id: str,
                 pauses_before: list[float] | None, submit_barrier: threading.Barrier | None = None,
                 arrive_at: float = 0.0, progress=None, lab_setting: str = ""):
        self.accounts, self.name, self.answers, self.course_id = accounts, name, answers, course_id
        self.pauses_before, self.submit_barrier, self.arrive_at = pauses_before, submit_barrier, arrive_at
        self.figures = StudentFigures(name)
        self.progress, self._reached, self.lab_setting = progress, False, lab_setting

    def run(self, started: float, stop: threading.Event) -> None:
        kernel = None
        try:
            if stop.wait(max(0.0, started + self.arrive_at - time.perf_counter())):
                return
            session = Session(self.accounts["url"], self.name, self.accounts["passwords"][self.name])
            session.login()
            self.figures.spawn = session.spawn()
            session.nbgrader("fetch", course_id=self.course_id, assignment_id=ASSIGNMENT)
            path = f"{ASSIGNMENT}/{NOTEBOOK}"
            nb = answered_notebook(session.api("GET", f"/api/contents/{path}?content=1")["content"], self.answers)
            kernel = Kernel(session, path)
            if self.lab_setting:  # not what students run: a shorter lab for a smoke run (--lab-setting)
                kernel.execute(f"import os; os.environ['RLHF_LAB_SETTING'] = {self.lab_setting!r}")
            code = [c for c in nb["cells"] if c["cell_type"] == "code"]
            for index, cell in enumerate(code):
                if self.pauses_before and kernel.pause(self.pauses_before[index], stop):
                    return
                sent = time.perf_counter() - started
                seconds, errors = kernel.execute(cell["source"])
                if errors:
                    raise RuntimeError(f"cell {index} raised {errors[0]}")
                if cell.get("metadata", {}).get("nbgrader", {}).get("grade_id") == TRAINING_CELL:
                    self.figures.training, self.figures.training_at = seconds, sent
                    self.figures.training_wait = slot_wait(kernel.output)
                else:
                    self.figures.cells.append(seconds)
                if self.progress:
                    self.progress.update()
            session.api("PUT", f"/api/contents/{path}", json={"type": "notebook", "format": "json", "content": nb})
            self.figures.cpu_seconds = self._cpu(kernel)
            kernel.close()
            kernel = None
            began = time.perf_counter()
            result = session.nbgrader("validate", path=path)
            self.figures.validate = time.perf_counter() - began
            self.figures.validate_ok, self.figures.validate_problem = validate_verdict(result)
            self._reach_the_submit()
            result = session.nbgrader("submit", course_id=self.course_id, assignment_id=ASSIGNMENT)
            if isinstance(result, dict) and result.get("success") is False:
                raise RuntimeError(f"submit failed: {str(result.get('value'))[:300]}")
            self.figures.submitted = True
        except threading.BrokenBarrierError:
            self.figures.failure = "the class never reached the submit together"
        except Exception as error:  # recorded, the class goes on
            self.figures.failure = f"{type(error).__name__}: {error}"[:400]
            with contextlib.suppress(threading.BrokenBarrierError):
                self._reach_the_submit()  # the others submit together all the same
        finally:
            if kernel:
                kernel.close()
            self.figures.memory_mib = user_cgroup_memory(self.name)

    def _reach_the_submit(self) -> None:
        """Burst: wait until every student (and the instructor's collect) is ready to submit, once."""
        if self.submit_barrier is not None and not self._reached:
            self._reached = True
            self.submit_barrier.wait(timeout=3600)

    def _cpu(self, kernel: Kernel) -> float:
        msg_id_errors = []
        captured = []
        original = kernel.ws.recv

        def recv():
            raw = original()
            if isinstance(raw, str) and "CPU_SECONDS" in raw:
                match = re.search(r"CPU_SECONDS ([0-9.]+)", raw)
                if match:
                    captured.append(float(match.group(1)))
            return raw
        kernel.ws.recv = recv
        try:
            _, msg_id_errors = kernel.execute(CPU_PROBE)
        finally:
            kernel.ws.recv = original
        return captured[0] if captured and not msg_id_errors else math.nan


def validate_verdict(result) -> tuple[bool, str]:
    """nbgrader's Validate answer as the lab reads it: (passed, what went wrong)."""
    if not isinstance(result, dict) or not result.get("success"):
        return False, str((result or {}).get("value", result))[:300] if isinstance(result, dict) else str(result)[:300]
    value = result.get("value")
    if isinstance(value, str):
        with contextlib.suppress(ValueError):
            value = json.loads(value)
    if isinstance(value, dict):
        problems = [k for k in ("failed", "changed", "type_changed") if value.get(k)]
        first = next((value[k][0] for k in problems if isinstance(value[k], list) and value[k]), None)
        said = f" (first: {str(first.get('error') or first.get('source'))[:150]!r})" if isinstance(first, dict) else ""
        return (not problems), ", ".join(f"{k}: {len(value[k])}" for k in problems) + said
    return False, f"unexpected answer: {str(value)[:200]}"


def machine_used_mib() -> float:
    """The machine's memory in use, MiB: MemTotal - MemAvailable (/proc/meminfo; the page cache the kernel can
    reclaim is not counted, as ``free``'s "available" does not)."""
    fields = {line.split(":")[0]: int(line.split()[1]) for line in Path("/proc/meminfo").read_text().splitlines()}
    return (fields["MemTotal"] - fields["MemAvailable"]) / 1024


def machine_total_mib() -> float:
    return int(Path("/proc/meminfo").read_text().split("\n", 1)[0].split()[1]) / 1024


HEADROOM_GOAL = 0.75  # of the machine's memory: what a class may use at its peak, leaving room for a late joiner


def machine_memory(samples: list[float], before_hub: float, total: float, students: int) -> dict:
    """The class's simultaneous memory peak, from the machine's used MiB sampled once a second while it ran
    (``samples``), beside the machine's ``total`` and what was in use before the hub started (``before_hub``):
    the peak's share of the machine, the cost of a student (everything the hub added, server, kernels,
    Validates, hub and proxy included, over ``students``) and how many students fit within
    :data:`HEADROOM_GOAL` at that cost."""
    peak = max(samples, default=math.nan)
    per_student = (peak - before_hub) / students if students else math.nan
    fit = math.floor((HEADROOM_GOAL * total - before_hub) / per_student) if per_student > 0 else None
    return {"total_mib": total, "before_hub_mib": before_hub, "peak_mib": peak, "peak_share": peak / total,
            "per_student_mib": per_student, "students_within_goal": fit, "goal_share": HEADROOM_GOAL}


class HubLatency:
    """GET /hub/api/user as a logged-in user, once a second: the hub's own latency while the class works (and
    the load average and the machine's used memory, sampled with it)."""

    def __init__(self, accounts: dict, name: str):
        self.session = Session(accounts["url"], name, accounts["passwords"][name])
        self.session.login()
        self.latencies: list[float] = []
        self.loads: list[tuple[float, float, float]] = [os.getloadavg()]
        self.memory: list[float] = [machine_used_mib()]
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(1.0):
            started = time.perf_counter()
            with contextlib.suppress(Exception):
                reply = self.session.http.get(f"{self.session.url}/hub/api/user", timeout=60,
                                              headers={"X-XSRFToken": self.session._xsrf("/hub/")})
                if reply.status_code == 200:
                    self.latencies.append(time.perf_counter() - started)
            self.loads.append(os.getloadavg())
            self.memory.append(machine_used_mib())

    def stop(self) -> tuple[list[float], list[tuple[float, float, float]]]:
        self._stop.set()
        self._thread.join()
        self.loads.append(os.getloadavg())
        self.memory.append(machine_used_mib())
        return self.latencies, self.loads


NEIGHBOUR_CODE = {
    "spinner": "import threading\n"
               "def spin():\n    while True: pass\n"
               "for _ in range(2): threading.Thread(target=spin, daemon=True).start()\n",
    "hog": "import threading\nhog = []\n"
           "def grow():\n    while True: hog.append(bytearray(64 * 2**20))\n"
           "threading.Thread(target=grow, daemon=True).start()\n",
    "forkbomb": "import os, time\n"
                "for _ in range(100000):\n"
                "    try:\n        pid = os.fork()\n    except OSError:\n        time.sleep(0.05); continue\n"
                "    if pid == 0:\n        time.sleep(3600); os._exit(0)\n",
    "diskfill": "import os, threading\n"
                "def fill(limit_mib={limit}):\n"
                "    os.makedirs('fill', exist_ok=True)\n"
                "    for i in range(limit_mib // 64):\n"
                "        with open(f'fill/{{i}}.bin', 'wb') as f: f.write(os.urandom(64 * 2**20))\n"
                "threading.Thread(target=fill, daemon=True).start()\n",
}


def start_neighbour(accounts: dict, name: str, kind: str, disk_fill_mib: int) -> tuple[Session, Kernel]:
    """A neighbour's server and a kernel running its hostile code in the background (the cell returns)."""
    session = Session(accounts["url"], name, accounts["passwords"][name])
    session.login()
    session.spawn()
    session.api("PUT", "/api/contents/hostile.ipynb", json={"type": "notebook", "format": "json", "content": {
        "cells": [], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}})
    kernel = Kernel(session, "hostile.ipynb")
    code = NEIGHBOUR_CODE[kind].format(limit=disk_fill_mib) if kind == "diskfill" else NEIGHBOUR_CODE[kind]
    if kind == "forkbomb":  # the cell itself never returns (it keeps forking): send it without waiting
        kernel.ws.send(json.dumps({"header": {"msg_id": uuid.uuid4().hex, "username": name, "session": kernel.client_session,
                                              "msg_type": "execute_request", "version": "5.3"},
                                   "parent_header": {}, "metadata": {}, "channel": "shell", "buffers": [],
                                   "content": {"code": code, "silent": False, "store_history": True,
                                               "user_expressions": {}, "allow_stdin": False, "stop_on_error": True}}))
    else:
        kernel.execute(code, timeout=120)
    return session, kernel


WRITTEN = ("Without the KL penalty the policy drifts to whatever the reward model over-scores; the penalty keeps "
           "it near the reference, where the reward model's scores still mean something.")


def reference_answers() -> dict[str, str]:
    """The reference solution's code answers, and a sentence in each written answer (markdown) cell: a notebook
    Validate passes, as a student who did the work hands in."""
    from rlhf_course.course import notebooks
    answers = notebooks.solution_answers(notebooks.read(REPO / "source" / ASSIGNMENT / NOTEBOOK))
    release = notebooks.read(REPO / "release" / ASSIGNMENT / NOTEBOOK)
    for cell in release.cells:
        if cell.cell_type == "markdown" and cell.metadata.get("nbgrader", {}).get("solution"):
            answers[notebooks.grade_id(cell)] = WRITTEN
    return answers


def code_cells_of_release() -> list[tuple[str, bool]]:
    from rlhf_course.course import notebooks
    nb = notebooks.read(REPO / "release" / ASSIGNMENT / NOTEBOOK)
    return [(notebooks.grade_id(c) or "", notebooks.is_answer_cell(c)) for c in nb.cells if c.cell_type == "code"]


def run_class(accounts: dict, names: list[str], scenario: str, args, answers: dict, course_id: str) -> list[StudentFigures]:
    from tqdm import tqdm
    cells = code_cells_of_release()
    stop = threading.Event()
    barrier = threading.Barrier(len(names) + 1) if scenario == "burst" else None
    times = arrivals(names, args.arrival_minutes, args.seed) if scenario == "lab" else {n: 0.0 for n in names}
    progress = tqdm(total=len(names) * len(cells), desc=f"{scenario}: {len(names)} students' cells", unit="cell")
    students = [Student(accounts, n, answers, course_id,
                        pauses(n, cells, args.seed, args.pause_scale, args.pace) if scenario == "lab" else None,
                        barrier, times[n], progress, args.lab_setting) for n in names]
    started = time.perf_counter()
    threads = [threading.Thread(target=s.run, args=(started, stop), daemon=True) for s in students]
    for t in threads:
        t.start()
    collects = 0
    try:
        if barrier is not None:  # burst: everyone submits in the same second while the instructor collects
            with contextlib.suppress(threading.BrokenBarrierError):
                barrier.wait(timeout=3600)
                instructor(accounts, "collect", ASSIGNMENT)
                collects += 1
        for t in threads:
            t.join()
    except KeyboardInterrupt:
        stop.set()
        if barrier is not None:
            barrier.abort()
        raise
    finally:
        progress.close()
    return [s.figures for s in students]


def collected(accounts: dict, names: list[str]) -> int:
    instructor(accounts, "collect", ASSIGNMENT)
    course = Path(accounts["course"])
    return sum((course / "submitted" / n / ASSIGNMENT / NOTEBOOK).is_file() for n in names)


def alone(accounts: dict, name: str, answers: dict, course_id: str, lab_setting: str) -> StudentFigures:
    """One student runs the notebook with nobody else: the training cell's time alone."""
    student = Student(accounts, name, answers, course_id, None, lab_setting=lab_setting)
    student.run(time.perf_counter(), threading.Event())
    if student.figures.failure:
        raise RuntimeError(f"the student alone failed: {student.figures.failure}")
    return student.figures


def machine_cpu_seconds() -> tuple[float, float]:
    """(busy, idle) CPU seconds of the whole machine since boot, every core (/proc/stat's first line)."""
    fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    idle = fields[3] + fields[4]  # idle, iowait
    return (sum(fields[:8]) - idle) / os.sysconf("SC_CLK_TCK"), idle / os.sysconf("SC_CLK_TCK")


def scenario_figures(accounts, names, scenario, args, answers, course_id, alone_training, memory_before_hub) -> dict:
    watcher = HubLatency(accounts, accounts["instructor"])
    machine_before, driver_before = machine_cpu_seconds(), time.process_time()
    class_before = classroom_cpu_seconds(names)  # pre-started servers' and warm kernels' start
    try:
        figures = run_class(accounts, names, scenario, args, answers, course_id)
        class_cpu = classroom_cpu_seconds(names) - class_before
    finally:
        latencies, loads = watcher.stop()
    (busy, idle), driver = machine_cpu_seconds(), time.process_time() - driver_before
    # Where the CPU went while the class ran: the simulated students' own client code (this process: in a real class
    # it runs in the students' browsers, on their laptops), the class's servers and kernels, the rest (hub, proxy,
    # Validate's and Submit's nbgrader run in the servers' cgroups too; anything else on the machine).
    cpu = {"machine_busy_s": busy - machine_before[0], "machine_idle_s": idle - machine_before[1],
           "simulated_students_client_s": driver, "class_servers_and_kernels_s": class_cpu}
    from rlhf_course.classroom.training_broker import default_slots
    slots = args.training_slots if args.training_slots is not None else default_slots(os.cpu_count(), 1.0)
    return summarise(figures, latencies, alone_training, collected(accounts, names), loads,
                     slots=slots or os.cpu_count()) | {
        "cpu": cpu, "machine_memory": machine_memory(watcher.memory, memory_before_hub, machine_total_mib(), len(names)),
        "per_student": [vars(f) for f in figures]}


def classrooms_with_prefix(prefix: str) -> list[int]:
    """The pids of running classrooms (``python -m rlhf_course.classroom``) whose accounts take ``prefix``: a second
    one would remove and re-create the same accounts under the first (it clears accounts an interrupted run left)."""
    from rlhf_course.classroom.hub import _processes
    return [pid for pid, argv in _processes()
            if argv[1:3] == ["-m", "rlhf_course.classroom"] and "--prefix" in argv
            and argv[argv.index("--prefix") + 1:argv.index("--prefix") + 2] == [prefix]]


def classroom_cpu_seconds(names: list[str]) -> float:
    """CPU seconds the processes now in these users' cgroups have used (their servers and kernels), with their
    children that ended (a server's Validate and Submit runs)."""
    from rlhf_course.classroom.spawner import UserCgroup
    ticks, seen = 0, set()
    for name in names:
        for folder in UserCgroup(name).dirs():
            with contextlib.suppress(OSError):
                seen.update((folder / "cgroup.procs").read_text().split())
    for pid in seen:
        with contextlib.suppress(OSError, IndexError, ValueError):
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            ticks += sum(int(x) for x in fields[11:15])  # utime, stime, cutime, cstime
    return ticks / os.sysconf("SC_CLK_TCK")


def wait_until_quiet(names: list[str], cores: float = 0.1, window: float = 3.0, cap: float = 300.0) -> float:
    """Wait until these users' processes use less than ``cores`` cores over ``window`` seconds (a pre-started
    server's warm kernel imports in the background after the hub calls the server ready); the seconds waited
    (``cap`` at most).  Only the class's own cgroups count: other developers' load does not hold it up."""
    began = time.perf_counter()
    while time.perf_counter() - began < cap:
        before = classroom_cpu_seconds(names)
        time.sleep(window)
        if classroom_cpu_seconds(names) - before < cores * window:
            break
    return time.perf_counter() - began


def prestart_class(accounts: dict, base: Path, names: list[str], parallel: int | None) -> dict:
    """``python -m rlhf_course.classroom prestart`` for the class (what an instructor runs before it), timed, then
    the wait until the servers are quiet; the figures, reported apart from the students' spawn."""
    command = [sys.executable, "-m", "rlhf_course.classroom", "prestart", "--base", str(base), *names]
    if parallel:
        command += ["--parallel", str(parallel)]
    load = os.getloadavg()
    began = time.perf_counter()
    proc = subprocess.run(command, cwd=REPO, capture_output=True, text=True)
    seconds = time.perf_counter() - began
    settle = wait_until_quiet(names)
    started = re.findall(r"^  (\S+)\s+started in ([0-9.]+) s", proc.stdout, re.M)
    figures = {"seconds": seconds, "settled_after_s": settle, "returncode": proc.returncode,
               "servers_started": len(started),
               "server_s": {"p50": percentile([float(x) for _, x in started], 50),
                            "max": max((float(x) for _, x in started), default=math.nan)},
               "summary": [line for line in proc.stdout.splitlines() if re.match(r"\d+ started, ", line)],
               "failures": [line.strip() for line in proc.stdout.splitlines() if " failed" in line and ":" in line],
               "load_start": load, "load_end": os.getloadavg()}
    if proc.returncode:
        print(f"prestart failed ({proc.returncode}):\n{proc.stdout[-3000:]}{proc.stderr[-2000:]}", flush=True)
    return figures


def host_gauge(when: str) -> dict:
    """bench/host_speed.py's gauge, printed: how fast this host's cores are now (the run's hour, beside its figures)."""
    from bench.host_speed import measure
    seconds, ratio = measure()
    print(f"host speed {when} the run: {seconds:.3f} s for the fixed work, {ratio:.2f}x the reference hour's "
          f"(bench/host_speed.py)", flush=True)
    return {"seconds": seconds, "ratio": ratio}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--students", type=int, default=5)
    parser.add_argument("--scenario", choices=("lab", "burst"), default="lab")
    parser.add_argument("--arrival-minutes", type=float, default=3.0)
    parser.add_argument("--pace", choices=PACES, default="people", help="lab: 'people' (median 4 s between cells, "
                        "30 s at an answer cell) or 'brisk' (uniform 4-12 s between cells, the answers pasted)")
    parser.add_argument("--pause-scale", type=float, default=1.0, help="scales every pause between cells (lab)")
    parser.add_argument("--seed", type=int, default=37)
    parser.add_argument("--with-neighbours", action="store_true", help="item 3: the class without, then with, "
                        "a CPU spinner, a memory hog, a fork bomb and a disk filler beside it")
    parser.add_argument("--disk-fill-mib", type=int, default=2048, help="what the disk filler writes at most")
    parser.add_argument("--memory", default="2G", help="each user's memory limit (HUB_MEMORY)")
    parser.add_argument("--lab-setting", choices=("", "smoke", "quick", "full"), default="",
                        help="the training cell's length (RLHF_LAB_SETTING, set in each kernel first); default: "
                             "what students run (quick)")
    parser.add_argument("--training-boost", type=int, default=None,
                        help="a slot holder's CPU weight (HUB_TRAINING_BOOST; default make hub's; 100: no boost)")
    parser.add_argument("--training-boost-cpus", type=float, default=None,
                        help="a slot holder's quota in cores while boosted (HUB_TRAINING_BOOST_CPUS; default: its own)")
    parser.add_argument("--validate-weight", type=int, default=None,
                        help="a validating student's CPU weight (HUB_VALIDATE_WEIGHT; default make hub's, 10 for a "
                             "lab or a burst; 100: no yield)")
    parser.add_argument("--training-slots", type=int, default=None,
                        help="labs training at once (HUB_TRAINING_SLOTS; default make hub's, cores over each user's "
                             "CPU quota; 0: no training queue)")
    parser.add_argument("--quick", action="store_true", help="a smoke run: 2 students, pauses x0.05, arrivals in "
                        "10 s, the lab's smoke setting")
    parser.add_argument("--prestart", action="store_true", help="the instructor starts the class's servers before "
                        "the class (python -m rlhf_course.classroom prestart), timed apart; the class starts once "
                        "their processes are quiet")
    parser.add_argument("--prestart-parallel", type=int, default=None, help="servers prestart starts at a time "
                        "(default: its own, the CPUs)")
    parser.add_argument("--warm-kernels", action="store_true", help="make hub HUB_WARM_KERNELS=1: each student's "
                        "server keeps a kernel with the notebook's imports done for the first notebook")
    parser.add_argument("--hub-class", choices=("lab", "burst", "off"), default="off",
                        help="make hub's HUB_CLASS: lab or burst, the hub as make hub starts it by default (warm kernels, "
                             "every server started in the background as the hub starts, for a lab the training boost): "
                             "the run waits for those servers before the class; off (default): only what the options "
                             "here ask for")
    parser.add_argument("--json", type=Path, help="write the figures there too (and the hub's logs beside it: "
                                                      "RUN.jupyterhub.log, RUN.make-hub.log, RUN.servers/)")
    args = parser.parse_args()
    if args.quick:
        args.students, args.pause_scale, args.arrival_minutes = 2, 0.05, 1 / 6
        args.lab_setting = args.lab_setting or "smoke"
    if os.geteuid() != 0:
        parser.error("needs root: make hub creates accounts and runs each server as its user")
    running = classrooms_with_prefix(PREFIX)
    if running:
        parser.error(f"another bench/classroom.py's hub runs with the accounts {PREFIX}* (pid {running[0]}): two at "
                     f"once remove each other's accounts; wait for it to end")
    students = [f"s{i:03d}" for i in range(1, args.students + 1)]
    second_class = [f"t{i:03d}" for i in range(1, args.students + 1)] if args.with_neighbours else []
    extra = [f"n_{k}" for k in NEIGHBOURS] if args.with_neighbours else []
    _lock = one_class_at_a_time()  # held until this process ends
    make_variables = (f"HUB_CLASS={args.hub_class}",) + (("HUB_WARM_KERNELS=1",) if args.warm_kernels else ()) + \
        ((f"HUB_TRAINING_SLOTS={args.training_slots}",) if args.training_slots is not None else ()) + \
        ((f"HUB_TRAINING_BOOST={args.training_boost}",) if args.training_boost is not None else ()) + \
        ((f"HUB_TRAINING_BOOST_CPUS={args.training_boost_cpus}",) if args.training_boost_cpus is not None else ()) + \
        ((f"HUB_VALIDATE_WEIGHT={args.validate_weight}",) if args.validate_weight is not None else ())
    hub = Hub(students + second_class + extra + ["solo"], args.memory, make_variables)
    signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt()))
    results: dict = {"date": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
                     "args": {k: str(v) for k, v in vars(args).items()}, "load_at_start": os.getloadavg()}
    print(f"load average at the start: {' '.join(f'{x:.2f}' for x in os.getloadavg())} ({os.cpu_count()} cores)",
          flush=True)
    results["host_speed_before"] = host_gauge("before")
    results["memory_before_hub_mib"] = memory_before_hub = machine_used_mib()
    neighbours = []
    try:
        accounts = hub.wait_ready()
        print(f"make hub ready; {len(students)} students ({args.scenario}, HUB_CLASS={args.hub_class})", flush=True)
        if args.hub_class != "off":
            results["background_prestart"] = hub.wait_prestarted()
            print(f"the hub's background start of every server: {results['background_prestart']['said']}", flush=True)
        course_id = course_id_of(accounts)
        instructor(accounts, "release_assignment", ASSIGNMENT)
        answers = reference_answers()
        names = [f"{PREFIX}{s}" for s in students]
        solo = alone(accounts, f"{PREFIX}solo", answers, course_id, args.lab_setting)
        results["alone"] = vars(solo)
        print(f"alone: training {solo.training:.1f} s, cells p50 {percentile(solo.cells, 50):.3f} s, "
              f"Validate {solo.validate:.1f} s, kernel CPU {solo.cpu_seconds:.1f} s", flush=True)
        if args.prestart:
            results["prestart"] = prestart_class(accounts, hub.base, names, args.prestart_parallel)
            p = results["prestart"]
            print(f"prestart: {p['servers_started']} servers in {p['seconds']:.1f} s (each {p['server_s']['p50']:.1f} s "
                  f"p50, {p['server_s']['max']:.1f} s max), quiet {p['settled_after_s']:.0f} s later; "
                  f"{' '.join(p['summary'][:1])}; load {' '.join(f'{x:.2f}' for x in p['load_end'])}", flush=True)
        results["class"] = scenario_figures(accounts, names, args.scenario, args, answers, course_id, solo.training,
                                            memory_before_hub)
        print(table(f"{args.scenario}, {len(names)} students", results["class"]), flush=True)
        print("CPU while the class ran: " + ", ".join(f"{k} {v:.0f}" for k, v in results["class"]["cpu"].items()),
              flush=True)
        print(memory_line(results["class"]["machine_memory"]), flush=True)
        if args.with_neighbours:
            for kind in NEIGHBOURS:
                neighbours.append(start_neighbour(accounts, f"{PREFIX}n_{kind}", kind, args.disk_fill_mib))
            time.sleep(5)  # the hog reaches its limit, the fork bomb its process limit
            second = [f"{PREFIX}{s}" for s in second_class]  # the same class again, on fresh accounts
            results["with_neighbours"] = scenario_figures(accounts, second, args.scenario, args, answers, course_id,
                                                          solo.training, memory_before_hub)
            results["isolation"] = isolation(results["class"], results["with_neighbours"])
            print(table(f"{args.scenario}, {len(names)} students beside {', '.join(NEIGHBOURS)}",
                        results["with_neighbours"]), flush=True)
            print(f"isolation: p95 with / without {results['isolation']['p95_ratio']:.2f}x (target <= 1.5), "
                  f"lost submissions {results['isolation']['lost_submissions']}, "
                  f"failures {results['isolation']['failures'] or 'none'}", flush=True)
    except KeyboardInterrupt:
        print("interrupted: stopping the hub, removing every account and server", flush=True)
        return 130
    finally:
        for session, kernel in neighbours:
            kernel.close()
        hub.stop(keep_logs=args.json)
    results["load_at_end"] = os.getloadavg()
    print(f"load average at the end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    results["host_speed_after"] = host_gauge("after")
    if args.json:
        args.json.write_text(json.dumps(results, indent=1, default=str))
    return 0


def course_id_of(accounts: dict) -> str:
    """The course id the students' nbgrader config names (the hub wrote it)."""
    from traitlets.config.loader import PyFileConfigLoader
    folder = Path(accounts["exchange"]).parent / "jupyter" / "student"
    return PyFileConfigLoader("nbgrader_config.py", path=str(folder)).load_config().CourseDirectory.course_id


if __name__ == "__main__":
    raise SystemExit(main())
