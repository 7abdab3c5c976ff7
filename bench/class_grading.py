"""Grading a whole class through the exchange (issue #37, item 6): a synthetic class of N students x 3
assignments, collected, graded by the trusted grader, feedback released and exported, at several sizes.

    sudo .venv/bin/python bench/class_grading.py --sizes 30,100,300 [--workers 2] [--seed 37]

The class (students s001..sN, drawn per student from ``--seed``, so the first 30 of 300 are the class of 30):
each student submits ``rlhf``, ``kl_penalty`` and ``grpo``, each in the English or the Chinese edition
(``rlhf_zh`` ...), with the reference answers, a correct variant of the catalogue (``instructor/*catalogue.py``)
or one catalogued wrong answer; some hand in an untouched notebook first (the latest counts), some are late
(after the due date set between the two waves: 2 points off, ``PenaltyPerHour``).  Each student is a Unix
account (``rlhfcb_s001`` ...: the strict collect accepts an entry only from the user it names), whose inbound
entries are laid out as ``nbgrader submit`` (our ``StrictExchangeSubmit``) leaves them: name, owner, modes,
``timestamp.txt``.  Then, as the course does and timed stage by stage:

    nbgrader collect A                    (the strict exchange, for each of the 6 assignments)
    python -m rlhf_course.grading grade   (trusted, sandboxed, --workers; one run per base assignment and its edition)
    nbgrader release_feedback A           (the pages the grader wrote)
    nbgrader export                       (EditionsCsvExport: one row per student and base assignment)

and it checks that nothing is lost or mixed: every student has one exported row per assignment, in the edition
they submitted last, with the score their answers must get (the catalogue's ``loses``) and the late penalty
they must get; every collected submission has a feedback page with that score; nothing refused.

Figures: seconds per submission of each stage, the peak RSS of the grader process (``grade``) and of the grader
with its workers and sandboxes together, at each size; the ratio of the largest size's cost per submission to
the smallest's (flat: about 1).  Target: 300 submissions of one assignment graded in under 4 minutes on 2 cores.
Needs root (accounts, the sandbox).  Accounts and scratch folders are removed at the end, on Ctrl-C too.
"""
from __future__ import annotations

import argparse
import csv
import dataclasses
import datetime as dt
import json
import os
import random
import re
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "instructor"))

from rlhf_course import copy_course_files  # noqa: E402
from rlhf_course.grading import instructor
from rlhf_course.course import notebooks  # noqa: E402
from rlhf_course.course.settings import Course

ACCOUNT_PREFIX = "rlhfcb_"
BASES = {"rlhf": "rlhf_building_blocks.ipynb", "kl_penalty": "kl_penalty.ipynb", "grpo": "grpo.ipynb"}
CATALOGUES = {"rlhf": "rlhf_catalogue", "kl_penalty": "kl_penalty_catalogue", "grpo": "grpo_catalogue"}
LATE_PENALTY = 2.0  # PenaltyPerHour: 2 points for the first started hour (nbgrader_config.py)

# The class's mix (each drawn per student and assignment).
P_CHINESE = 0.3       # the Chinese edition, per student (all three assignments)
P_VARIANT = 0.15      # a correct variant of the catalogue, where it has some
P_WRONG = 0.3         # one catalogued wrong answer
P_LATE = 0.1          # handed in after the due date
P_RESUBMIT = 0.1      # an untouched notebook handed in first


@dataclasses.dataclass(frozen=True)
class Submission:
    """One student's final submission of one assignment, and what it must score."""
    student: str          # s001
    base: str             # rlhf, kl_penalty, grpo
    assignment: str       # the edition submitted: rlhf or rlhf_zh ...
    kind: str             # reference, variant, wrong
    answer: str           # the catalogue's name of the variant or wrong answer ("" for the reference)
    late: bool
    resubmitted: bool     # an untouched notebook was handed in before this one


def student_ids(size: int) -> list[str]:
    return [f"s{i:03d}" for i in range(1, size + 1)]


def draw_class(size: int, seed: int, catalogues: dict[str, object]) -> list[Submission]:
    """The synthetic class: a draw per student (seeded by ``seed`` and the student's id, so a class is the
    first ``size`` students of any larger one).  ``catalogues``: base assignment -> its catalogue module
    (``WRONG_ANSWERS``, optionally ``CORRECT_VARIANTS``)."""
    drawn = []
    for student in student_ids(size):
        rng = random.Random(f"{seed}:{student}")
        chinese = rng.random() < P_CHINESE
        for base in BASES:
            catalogue = catalogues[base]
            variants = list(getattr(catalogue, "CORRECT_VARIANTS", []))
            roll = rng.random()
            if roll < P_WRONG:
                kind, answer = "wrong", rng.choice(catalogue.WRONG_ANSWERS).name
            elif roll < P_WRONG + P_VARIANT and variants:
                kind, answer = "variant", rng.choice(variants).name
            else:
                kind, answer = "reference", ""
            drawn.append(Submission(student, base, f"{base}_zh" if chinese else base, kind, answer,
                                    late=rng.random() < P_LATE, resubmitted=rng.random() < P_RESUBMIT))
    return drawn


def expected_score(submission: Submission, points: dict[str, float], checks: set[str], catalogue) -> float:
    """The autograded score the answers must get: every check's points, less those of the cells the
    catalogued wrong answer loses (a correct variant loses none)."""
    lost = catalogue.WRONG_BY_NAME[submission.answer].loses if submission.kind == "wrong" else frozenset()
    unknown = set(lost) - checks
    if unknown:
        raise ValueError(f"{submission.answer} loses cells that are no checks of {submission.base}: {sorted(unknown)}")
    return sum(points[g] for g in checks) - sum(points[g] for g in lost)


def expected_penalty(submission: Submission, score: float) -> float:
    return min(score, LATE_PENALTY) if submission.late else 0.0


def per_submission(seconds: dict[str, float], count: int) -> dict[str, float]:
    """Stage -> seconds per submission (``count`` submissions)."""
    if count <= 0:
        raise ValueError("no submissions")
    return {stage: value / count for stage, value in seconds.items()}


def flatness(figures: list[dict], key: str) -> float:
    """The largest size's value of ``key`` over the smallest size's: 1.0 is perfectly flat (linear total
    for a cost per submission)."""
    ordered = sorted(figures, key=lambda f: f["size"])
    first, last = ordered[0][key], ordered[-1][key]
    if first <= 0:
        raise ValueError(f"{key} is {first} at size {ordered[0]['size']}")
    return last / first


def mismatches(drawn: list[Submission], exported: list[dict], account=lambda s: s,
               expected=lambda sub: 0.0) -> list[str]:
    """What the export got wrong against the draw: a student or assignment missing or twice, another edition,
    another score or penalty.  ``exported``: grades.csv rows; ``account``: student id -> the gradebook's id;
    ``expected``: submission -> the score it must get."""
    problems = []
    rows: dict[tuple[str, str], list[dict]] = {}
    for row in exported:
        rows.setdefault((row["student_id"], row["assignment"]), []).append(row)
    wanted = {(account(s.student), s.base): s for s in drawn}
    for key in sorted(set(rows) - set(wanted)):
        problems.append(f"{key}: exported but never submitted")
    for key, submission in sorted(wanted.items()):
        found = rows.get(key, [])
        if len(found) != 1:
            problems.append(f"{key}: {len(found)} exported rows")
            continue
        row, score = found[0], expected(submission)
        if row["edition"] != submission.assignment:
            problems.append(f"{key}: edition {row['edition']!r}, submitted {submission.assignment!r}")
        if abs(float(row["raw_score"] or 0) - score) > 1e-6:
            problems.append(f"{key}: score {row['raw_score']}, must be {score:g} ({submission.kind} {submission.answer})")
        penalty = expected_penalty(submission, score)
        if abs(float(row["late_submission_penalty"] or 0) - penalty) > 1e-6:
            problems.append(f"{key}: late penalty {row['late_submission_penalty']}, must be {penalty:g}")
    return problems


# ----------------------------------------------------------------------------- the run (root)

def load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


class Accounts:
    """The class's Unix accounts (no home, no login), removed by :meth:`remove` whatever happened."""

    def __init__(self, prefix: str):
        self.prefix, self.made = prefix, []

    def name(self, student: str) -> str:
        return f"{self.prefix}{student}"

    def create(self, students: list[str]) -> None:
        import pwd
        for student in students:
            name = self.name(student)
            try:
                pwd.getpwnam(name)
                raise RuntimeError(f"the account {name} exists already (another run of this bench?)")
            except KeyError:
                pass
            subprocess.run(["useradd", "--no-create-home", "--shell", "/usr/sbin/nologin", "-U", name], check=True,
                           capture_output=True)
            self.made.append(name)

    def remove(self) -> None:
        for name in self.made:
            subprocess.run(["userdel", name], capture_output=True)
        self.made = []


class PeakMemory:
    """Samples a process and everything under it (workers, sandboxes) every ``interval`` s: the peak RSS of the
    process itself and of the whole tree together, in MiB."""

    def __init__(self, pid: int, interval: float = 0.2):
        import psutil
        self.root, self.interval = psutil.Process(pid), interval
        self.own = self.tree = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        import psutil
        while not self._stop.is_set():
            try:
                own = self.root.memory_info().rss
                total = own
                for child in self.root.children(recursive=True):
                    try:
                        total += child.memory_info().rss
                    except psutil.Error:
                        pass
            except psutil.Error:
                return
            self.own, self.tree = max(self.own, own / 2**20), max(self.tree, total / 2**20)
            self._stop.wait(self.interval)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()


def run(command: list[str], cwd: Path, env: dict, memory: bool = False) -> tuple[float, PeakMemory | None]:
    """Seconds the command took (and its memory peaks); raises with its output when it fails."""
    started = time.perf_counter()
    process = subprocess.Popen(command, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    sampler = PeakMemory(process.pid) if memory else None
    output, _ = process.communicate()
    seconds = time.perf_counter() - started
    if sampler:
        sampler.stop()
    if process.returncode:
        raise RuntimeError(f"{' '.join(command)} failed ({process.returncode}):\n{output[-4000:]}")
    return seconds, sampler


def course_template(scratch: Path) -> Path:
    """The course's inputs with its release generated (nbgrader generate_assignment, once for every size)."""
    from rlhf_course.grading import release
    course = scratch / "template"
    course.mkdir(parents=True)
    copy_course_files(course, REPO)
    course_handle = Course.at(course)
    release.generate_release(course_handle)
    return course


class Notebooks:
    """The submitted notebooks' text per (assignment, kind, answer), made once from the release."""

    def __init__(self, course: Path, catalogues: dict):
        self.course, self.catalogues, self.made = course, catalogues, {}

    def text(self, assignment: str, base: str, kind: str, answer: str) -> str:
        import nbformat
        key = (assignment, kind, answer)
        if key not in self.made:
            release_nb = notebooks.read(self.course / "release" / assignment / BASES[base])
            answers = {} if kind == "untouched" else notebooks.solution_answers(
                notebooks.read(self.course / "source" / base / BASES[base]))
            catalogue = self.catalogues[base]
            if kind == "wrong":
                chosen = catalogue.WRONG_BY_NAME[answer]
                answers[chosen.answer_cell] = chosen.source
            elif kind == "variant":
                chosen = {v.name: v for v in catalogue.CORRECT_VARIANTS}[answer]
                answers[chosen.answer_cell] = chosen.source
            self.made[key] = nbformat.writes(notebooks.fill_answers(release_nb, answers))
        return self.made[key]


def hand_in(inbound: Path, account: str, submission: Submission, text: str) -> None:
    """An inbound entry as our StrictExchangeSubmit leaves it: ``<student>+<assignment>+<time>+<random>``,
    0770 / 0640, the student's, in inbound's group (set-group-ID), with ``timestamp.txt``."""
    import pwd

    from rlhf_course.exchange.base import SUBMISSION_DIR_MODE, SUBMISSION_FILE_MODE
    stamp = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S.%f UTC")
    entry = inbound / f"{account}+{submission.assignment}+{stamp}+{secrets.token_hex(16)}"
    entry.mkdir()
    uid, gid = pwd.getpwnam(account).pw_uid, inbound.stat().st_gid
    for name, content in ((BASES[submission.base], text), ("timestamp.txt", stamp)):
        (entry / name).write_text(content)
        os.chown(entry / name, uid, gid)
        (entry / name).chmod(SUBMISSION_FILE_MODE)
    os.chown(entry, uid, gid)
    entry.chmod(SUBMISSION_DIR_MODE)


def set_due_date(course: Path, due: dt.datetime, env: dict) -> None:
    """The due date of every assignment, in the gradebook (what the late penalty reads)."""
    stamp = due.strftime("%Y-%m-%d %H:%M:%S UTC")
    for base in BASES:
        for assignment in (base, f"{base}_zh"):
            run([sys.executable, "-m", "nbgrader", "db", "assignment", "add", assignment, f"--duedate={stamp}"],
                course, env)


def one_size(size: int, drawn: list[Submission], template: Path, scratch: Path, accounts: Accounts,
             made: Notebooks, workers: int, expected) -> dict:
    from tqdm import tqdm
    here = scratch / f"class-{size}"
    course, exchange = here / "course", here / "exchange"
    shutil.copytree(template, course)
    exchange.mkdir(parents=True)
    exchange.chmod(0o755)
    env = dict(os.environ, RLHF_EXCHANGE_ROOT=str(exchange),
               PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    assignments = [a for base in BASES for a in (base, f"{base}_zh")]
    for assignment in assignments:  # the instructor releases each (the exchange's outbound and inbound)
        run([sys.executable, "-m", "nbgrader", "release_assignment", assignment], course, env)
    inbound = next(exchange.glob("*/inbound"))
    on_time = [s for s in drawn if not s.late]
    late = [s for s in drawn if s.late]
    with tqdm(total=len(drawn) + sum(s.resubmitted for s in drawn), desc=f"{size} students hand in",
              unit="entry", leave=False) as bar:
        for submission in on_time + late:
            if submission is (late[0] if late else None):
                due = dt.datetime.now(dt.timezone.utc).replace(microsecond=0) + dt.timedelta(seconds=2)
                set_due_date(course, due, env)
                time.sleep(max(0.0, (due - dt.datetime.now(dt.timezone.utc)).total_seconds()) + 1.0)
            account = accounts.name(submission.student)
            if submission.resubmitted:
                hand_in(inbound, account, submission, made.text(submission.assignment, submission.base, "untouched", ""))
                bar.update()
            hand_in(inbound, account, submission, made.text(submission.assignment, submission.base,
                                                            submission.kind, submission.answer))
            bar.update()
        if not late:
            set_due_date(course, dt.datetime.now(dt.timezone.utc) + dt.timedelta(days=1), env)
    print(f"  {size} students: {len(drawn)} submissions ({len(late)} late, "
          f"{sum(s.resubmitted for s in drawn)} handed in twice), load {load()}", flush=True)

    seconds: dict[str, float] = {}
    started = time.perf_counter()
    for assignment in assignments:
        run([sys.executable, "-m", "nbgrader", "collect", assignment], course, env)
    seconds["collect"] = time.perf_counter() - started
    grade_runs = {}
    memory = {"grader_mib": 0.0, "grader_and_workers_mib": 0.0}
    for base in BASES:
        took, sampler = run([sys.executable, "-m", "rlhf_course.grading", "grade", base, f"{base}_zh",
                             "--course-root", str(course), f"--workers={workers}"], course, env, memory=True)
        grade_runs[base] = took
        memory["grader_mib"] = max(memory["grader_mib"], sampler.own)
        memory["grader_and_workers_mib"] = max(memory["grader_and_workers_mib"], sampler.tree)
        print(f"  graded {base} (both editions, {size} submissions): {took:.1f} s, "
              f"grader peak {sampler.own:.0f} MiB, with workers {sampler.tree:.0f} MiB, load {load()}", flush=True)
    seconds["grade"] = sum(grade_runs.values())
    started = time.perf_counter()
    for assignment in assignments:
        run([sys.executable, "-m", "nbgrader", "release_feedback", assignment], course, env)
    seconds["release_feedback"] = time.perf_counter() - started
    started = time.perf_counter()
    run([sys.executable, "-m", "nbgrader", "export", "--to", str(here / "export.csv")], course, env)
    seconds["export"] = time.perf_counter() - started
    seconds["total"] = sum(seconds.values())

    problems = check(drawn, course, exchange, here / "export.csv", accounts, expected)
    count = len(drawn)
    return {"size": size, "submissions": count, "late": len(late), "seconds": seconds,
            "per_submission": per_submission(seconds, count),
            "grade_seconds_per_assignment": grade_runs,
            "grade_per_submission": seconds["grade"] / count, **memory,
            "problems": problems, "load_after": load()}


def check(drawn: list[Submission], course: Path, exchange: Path, export: Path, accounts: Accounts, expected) -> list[str]:
    """Nothing lost or mixed: the export against the draw; every collected submission's feedback page, with
    its score, in the course and released to the exchange; no entry refused."""
    with open(export) as handle:
        problems = mismatches(drawn, list(csv.DictReader(handle)), accounts.name, expected)
    with open(course / "collect_report.csv") as handle:
        report = list(csv.DictReader(handle))
    refused = [r for r in report if r.get("status") == "refused"]
    problems += [f"refused at collect: {r}" for r in refused]
    for submission in drawn:
        page = course / "feedback" / accounts.name(submission.student) / submission.assignment / \
            BASES[submission.base].replace(".ipynb", ".html")
        if not page.is_file():
            problems.append(f"{submission.student} {submission.assignment}: no feedback page")
            continue
        if not re.search(rf"{re.escape(submission.assignment)}: {expected(submission):g} / ", page.read_text()):
            problems.append(f"{submission.student} {submission.assignment}: the page does not say "
                            f"{expected(submission):g}")
    released = list(exchange.glob("*/feedback/*.html"))
    if len(released) != len(drawn):
        problems.append(f"{len(released)} feedback pages released to the exchange for {len(drawn)} submissions")
    return problems


def table(figures: list[dict]) -> str:
    lines = [f"{'students':>8} {'subs':>5} {'collect':>8} {'grade':>7} {'release':>8} {'export':>7} {'total':>7}"
             f"  (s per submission)  {'grader MiB':>10} {'+workers MiB':>12} {'lost/mixed':>10}  load after"]
    for f in figures:
        p = f["per_submission"]
        lines.append(f"{f['size']:>8} {f['submissions']:>5} {p['collect']:>8.3f} {p['grade']:>7.3f} "
                     f"{p['release_feedback']:>8.3f} {p['export']:>7.3f} {p['total']:>7.3f}  {'':>19}"
                     f"{f['grader_mib']:>10.0f} {f['grader_and_workers_mib']:>12.0f} {len(f['problems']):>10}  "
                     f"{f['load_after']}")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="30,100,300", help="class sizes, comma-separated")
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--seed", type=int, default=37)
    parser.add_argument("--json", type=Path, help="write the figures there too")
    parser.add_argument("--keep", action="store_true", help="keep the scratch courses (the accounts are removed)")
    args = parser.parse_args()
    sizes = sorted({int(s) for s in args.sizes.split(",")})
    if os.geteuid() != 0:
        parser.error("needs root: the students' accounts and the grading sandbox")
    course = Course.at(REPO)  # the repository's checks and catalogues, read once
    catalogues = {base: instructor.load_module(course, name) for base, name in CATALOGUES.items()}
    scratch = Path(tempfile.mkdtemp(prefix="bench-class-"))
    scratch.chmod(0o755)
    accounts = Accounts(ACCOUNT_PREFIX)
    signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt()))
    figures = []
    print(f"load average at the start: {load()} ({os.cpu_count()} cores); scratch {scratch}", flush=True)
    try:
        started = time.perf_counter()
        template = course_template(scratch)
        points = {base: points_of(template, base) for base in BASES}
        checks = {base: set(instructor.load_module(course, instructor.checks_module_name(base)).CHECKS) for base in BASES}

        def expected(submission: Submission) -> float:
            return expected_score(submission, points[submission.base], checks[submission.base],
                                  catalogues[submission.base])

        made = Notebooks(template, catalogues)
        accounts.create(student_ids(max(sizes)))
        print(f"release and {max(sizes)} accounts: {time.perf_counter() - started:.0f} s", flush=True)
        for size in sizes:
            drawn = draw_class(size, args.seed, catalogues)
            figures.append(one_size(size, drawn, template, scratch, accounts, made, args.workers, expected))
            if not args.keep:
                shutil.rmtree(scratch / f"class-{size}", ignore_errors=True)
    except KeyboardInterrupt:
        print("interrupted: removing the accounts and the scratch folders", flush=True)
        return 130
    finally:
        accounts.remove()
        if not args.keep:
            shutil.rmtree(scratch, ignore_errors=True)
    print("\n" + table(figures))
    for f in figures:
        print(f"  {f['size']} students: grade per assignment (both editions, {f['size']} submissions): "
              + ", ".join(f"{b} {s:.1f} s" for b, s in f["grade_seconds_per_assignment"].items())
              + (f"; PROBLEMS: {f['problems'][:5]}" if f["problems"] else "; nothing lost or mixed"))
    if len(figures) > 1:
        print(f"flatness (largest / smallest size): grade s per submission {flatness(figures, 'grade_per_submission'):.2f}, "
              f"grader memory {flatness(figures, 'grader_mib'):.2f}, with workers {flatness(figures, 'grader_and_workers_mib'):.2f}")
    print(f"load average at the end: {load()}")
    if args.json:
        args.json.write_text(json.dumps(figures, indent=1))
    return 1 if any(f["problems"] for f in figures) else 0


def points_of(course: Path, base: str) -> dict[str, float]:
    """Grade id -> points of the assignment's release notebook (``nbgrader.points``)."""
    nb = notebooks.read(course / "release" / base / BASES[base])
    graded = [notebooks.grade_id(c) for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade")]
    return notebooks.points_of(nb, graded)


if __name__ == "__main__":
    raise SystemExit(main())
