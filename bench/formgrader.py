"""The Formgrader's grading page on a real instructor's server: how long an honest submission's page and the
worst ones take to open, and how the server answers meanwhile, side by side in one run.

One scratch course (this checkout's course files, a fresh release), graded by the trusted grader (`make grade`'s
command: sandboxed, so it needs root and bubblewrap), then `jupyter lab` on it as `make lab-instructor` starts
it (nbgrader's Formgrader and the course's server extension: the page renders in a child process killed at
``c.FormgraderPages.render_seconds``).  The pages:

    honest            the reference answers, written answers with math
    maple cell        a code cell of '"' + '\\a' * 28 with ``metadata.magics_language: maple`` (Pygments' Maple lexer:
                      about 44 s on it) and the notebook's ``language_info.pygments_lexer: ipython3``; graded
    maple fence       the same text in a written answer's "```maple" fence; graded
    hostile outputs   an answer cell that displays '<b>' * 87000, a 2 MiB print, SVG and JavaScript outputs: they
                      come back through the course's run of the canonical copy; graded
    maple cell, raw   the maple cell's notebook as the student submitted it, put over its autograded copy
                      (what the page would be without the canonical copy: only the exporter's lexer defends)
    slowest copy      the slowest page a canonical copy allows (60 added markdown cells of 64 KiB, each just under
                      the sanitiser's tag limit), put over an autograded copy

Each page is opened ``--repeat`` times, in turn with the others: over HTTP (the server's render) and, unless
``--no-browser``, in headless Chromium until the Formgrader has loaded the grades and MathJax has typeset the page
(what the instructor waits for).  Meanwhile ``/api/status`` is asked every 50 ms; its slowest and 95th-percentile
answers are printed per page, with the machine's load averages and core count (others may share the machine:
compare the figures of one run).  Exits 1 if ``/api/status`` ever took more than 1 s (or did not answer).

    python bench/formgrader.py [--repeat 3] [--budget SECONDS] [--no-browser] [--keep]
"""
from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

import nbformat  # noqa: E402

from rlhf_course import ASSIGNMENT, NOTEBOOK, copy_course_files  # noqa: E402
from rlhf_course.grading import examples, release
from rlhf_course.course import notebooks
from rlhf_course.course import settings  # noqa: E402
from rlhf_course.course.settings import Course

MAPLE_BOMB = '"' + "\\a" * 28  # Pygments' Maple lexer: 44 s on this (x3.3 per two more characters)
STATUS_LIMIT = 1.0  # seconds: the most /api/status may take while any page renders
CHROMIUM = "/usr/bin/chromium"
TOKEN = "rlhf-course-bench"
WRITTEN = ("Clipping keeps $r_t$ inside $[1-\\epsilon, 1+\\epsilon]$ only where moving further would help:\n\n"
           "$$L^{\\mathrm{CLIP}} \\le L^{\\mathrm{IS}}$$")
HOSTILE_OUTPUTS = '''
from IPython.display import HTML, Javascript, SVG, display
display(HTML("<b>" * 87000))
print("x" * (2 * 2**20))
display(SVG('<svg xmlns="http://www.w3.org/2000/svg" onload="window.__pwned=1"><circle r="5"/></svg>'))
display(Javascript("window.__pwned = 1"))
'''


def load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


# ----------------------------------------------------------------------------- the course

def new_course(course: Path) -> None:
    course.mkdir(parents=True)
    copy_course_files(course, REPO)
    course_handle = Course.at(course)
    release.generate_release(course_handle)


def write_submissions(course: Path) -> None:
    """One folder per page; the two planted pages are graded as honest submissions first (their gradebook
    entries), then their autograded copies are replaced (:func:`plant`)."""
    course_handle = Course.at(course)
    answers = {**examples.answers_for(course_handle, ()), "lab_question_1": WRITTEN}
    for student in ("honest", "maple_cell_raw", "slowest_copy"):
        examples.write_submission(course_handle, student, answers)
    folder = examples.write_submission(course_handle, "maple_cell", answers)
    nb = nbformat.read(str(folder / NOTEBOOK), 4)  # as tests/grading/test_safe_html.py's bomb: a cell added
    nb.cells.append(nbformat.v4.new_code_cell(MAPLE_BOMB, metadata={"magics_language": "maple"}))
    nb.metadata.setdefault("language_info", {})["pygments_lexer"] = "ipython3"
    nbformat.write(nb, str(folder / NOTEBOOK))
    examples.write_submission(course_handle, "maple_fence",
                              {**answers, "lab_question_1": f"My answer:\n\n```maple\n{MAPLE_BOMB}\n```\n"})
    examples.write_submission(course_handle, "hostile_outputs",
                              {**answers, "ppo_answer": answers["ppo_answer"] + HOSTILE_OUTPUTS})


def plant(course: Path) -> None:
    """The two pages no grading writes: the maple cell's raw notebook, and the slowest canonical copy."""
    from rlhf_course.grading.canonical import canonical_copy
    autograded = course / "autograded"
    shutil.copy2(course / "submitted" / "maple_cell" / ASSIGNMENT / NOTEBOOK,
                 autograded / "maple_cell_raw" / ASSIGNMENT / NOTEBOOK)
    release_nb = notebooks.read(course / "release" / ASSIGNMENT / NOTEBOOK)
    nb = nbformat.from_dict(json.loads(json.dumps(release_nb)))
    nb.cells += [nbformat.v4.new_markdown_cell("<div>" * 990 + "x" * 60_000) for _ in range(60)]
    nbformat.write(canonical_copy(nb, release_nb)[0], str(autograded / "slowest_copy" / ASSIGNMENT / NOTEBOOK))


def grade(course: Path, workers: int) -> None:
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "rlhf_course.grading", "grade", "--workers", str(workers)],
                          cwd=course, capture_output=True, text=True)
    if proc.returncode:
        raise SystemExit(f"grading failed:\n{proc.stdout[-2000:]}\n{proc.stderr[-3000:]}")
    print(f"graded {len(list((course / 'submitted').iterdir()))} submissions in {time.perf_counter() - start:.1f} s "
          f"(trusted, {workers} workers; load {load()})", flush=True)


def submission_ids(course: Path) -> dict[str, str]:
    from nbgrader.api import Gradebook
    with Gradebook(settings.Course.at(course).db_url, "rlhf-course") as gradebook:
        return {s: gradebook.find_submission_notebook(NOTEBOOK.removesuffix(".ipynb"), ASSIGNMENT, s).id
                for s in PAGES}


# ----------------------------------------------------------------------------- the server

class Server:
    """`jupyter lab` on the course, as `make lab-instructor` starts it (its own config, runtime and settings)."""

    def __init__(self, course: Path, scratch: Path, budget: float | None):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        config = scratch / "config"
        config.mkdir(parents=True)
        if budget is not None:
            (config / "jupyter_server_config.json").write_text(json.dumps({"FormgraderPages": {"render_seconds": budget}}))
        env = dict(os.environ, JUPYTER_CONFIG_DIR=str(config), JUPYTER_RUNTIME_DIR=str(scratch / "runtime"),
                   JUPYTERLAB_WORKSPACES_DIR=str(scratch / "workspaces"),
                   PYTHONPATH=f"{course / 'instructor'}{os.pathsep}{course}")
        self.log = open(scratch / "jupyterlab.log", "w")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "jupyterlab", "--no-browser", "--allow-root", f"--port={self.port}", "--ip=127.0.0.1",
             f"--IdentityProvider.token={TOKEN}", f"--ServerApp.root_dir={course}", "--LabApp.news_url=",
             "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate"],
            cwd=course, env=env, stdout=self.log, stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.time() + 90
        while time.time() < deadline:
            try:
                self.get("api/status", timeout=2)
                return
            except OSError:
                time.sleep(0.5)
        self.stop()
        raise SystemExit(f"the server did not start: see {scratch / 'jupyterlab.log'}")

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}/{path}?token={TOKEN}"

    def get(self, path: str, timeout: float = 120) -> tuple[float, str]:
        start = time.perf_counter()
        with urllib.request.urlopen(self.url(path), timeout=timeout) as response:
            body = response.read().decode()
        return time.perf_counter() - start, body

    def stop(self) -> None:
        os.killpg(self.process.pid, 15)
        try:
            self.process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, 9)
        self.log.close()


class StatusPoller:
    """``/api/status`` every 50 ms, in a thread, while a page is opened: each answer's seconds (None: no answer
    within 10 s)."""

    def __init__(self, server: Server):
        self.server, self.seconds, self._stop = server, [], threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.seconds.append(self.server.get("api/status", timeout=10)[0])
            except OSError:
                self.seconds.append(None)
            self._stop.wait(0.05)

    def __enter__(self) -> "StatusPoller":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()


def p95(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[max(0, math.ceil(0.95 * len(ordered)) - 1)]


# ----------------------------------------------------------------------------- the measurements

PAGES = {"honest": "honest", "maple_cell": "maple cell (graded)", "maple_fence": "maple fence (graded)",
         "hostile_outputs": "hostile outputs (graded)", "maple_cell_raw": "maple cell, raw (planted)",
         "slowest_copy": "slowest copy (planted)"}


def open_http(server: Server, submission: str) -> tuple[float, str]:
    seconds, body = server.get(f"formgrader/submissions/{submission}/")
    return seconds, ("over budget" if "did not render within" in body else "rendered")


def open_browser(context, server: Server, submission: str) -> tuple[float, str]:
    page = context.new_page()
    try:
        start = time.perf_counter()
        page.goto(server.url(f"formgrader/submissions/{submission}/"), timeout=180_000)
        page.wait_for_function("document.body.innerText.includes('did not render within') || (window.MathJax"
                               " && MathJax.loaded === true && window.formgrader && formgrader.grades.loaded)",
                               timeout=180_000)
        seconds = time.perf_counter() - start
        return seconds, ("over budget" if "did not render within" in page.inner_text("body") else "rendered")
    finally:
        page.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=3, help="opens of each page, in turn with the others")
    parser.add_argument("--budget", type=float, default=None,
                        help="c.FormgraderPages.render_seconds for the server (default: the course's, 10 s)")
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1, help="grading workers")
    parser.add_argument("--no-browser", action="store_true", help="HTTP only (no Chromium)")
    parser.add_argument("--keep", action="store_true", help="keep the scratch course")
    args = parser.parse_args()
    from rlhf_course.grading.sandbox.sandbox import sandbox_available
    problem = sandbox_available()
    if problem:
        raise SystemExit(f"trusted grading needs the sandbox (root, bubblewrap): {problem}")
    browser = not args.no_browser and Path(CHROMIUM).exists()
    print(f"load average at the start: {load()} ({os.cpu_count()} cores)", flush=True)
    scratch = Path(tempfile.mkdtemp(prefix="bench-formgrader-"))
    course = scratch / "course"
    new_course(course)
    write_submissions(course)
    grade(course, args.workers)
    plant(course)
    ids = submission_ids(course)
    server = Server(course, scratch / "server", args.budget)
    opens: dict[str, list[tuple[str, float, str]]] = {label: [] for label in PAGES}
    status: dict[str, list] = {label: [] for label in PAGES}
    try:
        with StatusPoller(server) as idle:
            time.sleep(3)
        first = open_http(server, ids["honest"])[0]  # starts the pages' forkserver (nbconvert imported once)
        playwright = context = None
        if browser:
            from playwright.sync_api import sync_playwright
            playwright = sync_playwright().start()
            chromium = playwright.chromium.launch(executable_path=CHROMIUM, headless=True,
                                                  args=["--no-sandbox", "--disable-gpu", "--no-first-run"])
            context = chromium.new_context(extra_http_headers={"Authorization": f"token {TOKEN}"},
                                           viewport={"width": 1400, "height": 1000})
        for round_ in range(args.repeat):
            for label in PAGES:
                ways = [("http", open_http, (server, ids[label]))]
                if browser:
                    ways.append(("browser", open_browser, (context, server, ids[label])))
                for way, opener, opener_args in ways:
                    with StatusPoller(server) as poller:
                        seconds, outcome = opener(*opener_args)
                    opens[label].append((way, seconds, outcome))
                    status[label] += poller.seconds
            print(f"round {round_ + 1}/{args.repeat} done (load {load()})", flush=True)
        if browser:
            context.close()
            playwright.stop()
    finally:
        server.stop()

    budget = args.budget if args.budget is not None else 10.0
    print(f"\nThe Formgrader's grading page, {args.repeat} opens each (budget {budget:g} s); load average "
          f"{load()} at the end, {os.cpu_count()} cores")
    print(f"idle server: /api/status max {max(s for s in idle.seconds if s is not None) * 1000:.0f} ms "
          f"over {len(idle.seconds)} answers; the first page opened (it starts the pages' forkserver): {first:.2f} s")
    header = f"{'page':<28}{'http s (median / max)':>22}"
    if browser:
        header += f"{'browser s (median / max)':>26}"
    print(header + f"{'outcome':>14}{'status answers':>16}{'max ms':>8}{'p95 ms':>8}")
    failed = False
    for label, name in PAGES.items():
        line = f"{name:<28}"
        for way in (("http", "browser") if browser else ("http",)):
            seconds = [s for w, s, _ in opens[label] if w == way]
            width = 22 if way == "http" else 26
            line += f"{f'{statistics.median(seconds):.2f} / {max(seconds):.2f}':>{width}}"
        outcomes = sorted({o for _, _, o in opens[label]})
        answered = [s for s in status[label] if s is not None]
        missing = len(status[label]) - len(answered)
        slowest = max(answered) if answered else float("inf")
        failed |= missing > 0 or slowest > STATUS_LIMIT
        line += f"{'/'.join(outcomes):>14}{len(status[label]):>16}{slowest * 1000:>8.0f}{p95(answered) * 1000:>8.0f}"
        print(line + (f"  ({missing} unanswered)" if missing else ""))
    every = [s for label in PAGES for s in status[label]]
    answered = [s for s in every if s is not None]
    print(f"all pages: /api/status {len(every)} answers, max {max(answered) * 1000:.0f} ms, "
          f"p95 {p95(answered) * 1000:.0f} ms (limit {STATUS_LIMIT * 1000:.0f} ms)"
          + (f", {len(every) - len(answered)} unanswered" if len(answered) < len(every) else ""))
    if args.keep:
        print(f"scratch course kept in {scratch}")
    else:
        shutil.rmtree(scratch, ignore_errors=True)
    if failed:
        print(f"FAILED: /api/status took more than {STATUS_LIMIT:g} s (or did not answer) while a page rendered")
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
