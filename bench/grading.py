"""Stock ``nbgrader autograde`` against our trusted, sandboxed batch grader, and the old floor, side by side.

Everything is measured in one run on the same machine (others may share its CPU: compare the
figures of one run, and read the load averages printed with them):

    honest mix   correct answers, every wrong-answer style of ``instructor/rlhf_catalogue.py``,
                 a partly wrong and an untouched (empty) notebook; no hostile code
      stock      nbgrader autograde; then + generate_feedback + export        (one at a time, as nbgrader does)
      trusted    python -m rlhf_course.grading grade --workers N              (sandboxed, parallel;
                 feedback pages, autograded copies, gradebook and grades.csv included)
      old floor  N fresh bwrap sandboxes (same uids, cgroups, limits) that only start Python and import torch:
                 what every submission paid before the zygote (issue #36) imported torch once a batch
    hostile      every ``ADVERSARIAL`` submission of the catalogue, timed separately per submission:
                 trusted (one batch; the seconds each took its worker) and stock (one ``autograde
                 --student`` each, with the course's cell timeout); attacks that would act on this
                 machine under stock grading (fork bombs, stray processes, 6 GiB, writing outside the
                 course) are not run under stock; for the two infinite loops stock's cost is computed
                 (every cell calling the function waits the whole cell timeout: half an hour each).

    shaped       honest answers in notebooks shaped against the pages (issue #35): a cell whose Pygments lexer
                 (``magics_language: maple``, ``language_info``) was exponential on 57 and 61 bytes, the
                 clobbering notebook (a written answer moved to the top, one ``<h6 id=GRADE_ID class=hidden>``
                 per grade cell) and an answer that displays ``'<b>' * 87000``; one batch of --shaped-base
                 honest submissions with them, one with as many honest ones instead, each run twice, alternating.
                 Target: the batch with them within 2 s of the one without.

    python bench/grading.py [--size 24] [--workers 2] [--no-hostile | --hostile-only | --shaped-only]

Targets (issue #36): trusted at most 0.5 s a submission and at most 0.15x stock autograde alone (issue #16's,
1.3x the old floor and 0.25x stock, came before the zygote).
"""
from __future__ import annotations

import argparse
import csv
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "instructor"))

import rlhf_catalogue  # noqa: E402
from rlhf_course import NOTEBOOK  # noqa: E402
from rlhf_course.grading import examples, release
from rlhf_course.course import settings
from rlhf_course.course.settings import Course

# Under stock nbgrader these run as the instructor, on this machine: not started by the bench.
UNSAFE_UNDER_STOCK = {
    "fork_bomb_is_capped": "500 processes left sleeping on the host",
    "stray_background_processes": "processes left sleeping on the host",
    "allocates_6_gib": "6 GiB of the shared machine's memory",
    "writes_other_students_and_gradebook": "writes /work/gradebook.db on the host",
}
LOOPING = ("infinite_loop", "loop_ignoring_sigint")  # stock: every cell calling the function waits its timeout


def stock_loop_estimate(course: Path) -> str:
    """What a looping PPO answer costs stock autograde, computed: nbgrader interrupts each cell at its
    timeout and goes on (allow_errors), so every cell that calls the function waits the whole timeout."""
    from rlhf_course.course import notebooks
    release = notebooks.read(course / "release" / "rlhf" / NOTEBOOK)
    cells = [notebooks.grade_id(c) for c in release.cells if c.cell_type == "code"
             and (notebooks.grade_id(c) or "").startswith("ppo_") and not notebooks.is_answer_cell(c)]
    timeout = settings.course_config(course).Execute.timeout
    return (f"not run: {len(cells)} cells call the looping function, each waits the {timeout} s cell timeout: "
            f">= {len(cells) * timeout / 60:.0f} min (computed)")


def new_course(course: Path) -> None:
    course.mkdir(parents=True)
    for name in ("source", "instructor", "nbgrader_config.py"):
        src = REPO / name
        (shutil.copytree if src.is_dir() else shutil.copy2)(src, course / name)
    course_handle = Course.at(course)
    release.generate_release(course_handle)


def honest_plan(size: int) -> list[tuple[str, tuple[str, ...] | None]]:
    """(label, wrong answers) per submission: every wrong-answer style once, one partly wrong, one
    untouched release, the rest correct (so ``size`` is at least the number of styles + 2)."""
    styles = [(w.name, (w.name,)) for w in rlhf_catalogue.WRONG_ANSWERS]
    styles += [("partly_wrong", ("ppo_clip_without_min", "dpo_naive_log_sigmoid")), ("empty", None)]
    return styles + [("correct", ())] * max(0, size - len(styles))


def build_honest(course: Path, size: int) -> list[str]:
    new_course(course)
    students = []
    course_handle = Course.at(course)
    for i, (label, wrong) in enumerate(honest_plan(size)):
        student = f"s{i:03d}_{label}"
        examples.write_submission(course_handle, student, examples.answers_for(course_handle, wrong))
        students.append(student)
    return students


def build_hostile(course: Path) -> list[str]:
    new_course(course)
    students = []
    course_handle = Course.at(course)
    for attack in rlhf_catalogue.ADVERSARIAL:
        folder = examples.write_submission(course_handle, attack.name, {**examples.answers_for(course_handle, ()), **attack.answers})
        if attack.tamper:
            rlhf_catalogue.tamper_notebook(folder / NOTEBOOK, attack.tamper)
        students.append(attack.name)
    return students


MAPLE_BOMB = '"' + "\\a" * 28  # Pygments' Maple lexer took 44 s on these 57 bytes; x3.3 per two more characters


def shape_lexer_bomb(path: Path, pairs: int) -> None:
    """The submitted notebook asks for the Maple lexer everywhere and adds a cell it chokes on."""
    import nbformat
    nb = nbformat.read(str(path), 4)
    nb.metadata.setdefault("language_info", {})["pygments_lexer"] = "maple"
    bomb = nbformat.v4.new_code_cell('"' + "\\a" * pairs, metadata={"magics_language": "maple"})
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.metadata["magics_language"] = "maple"
    nb.cells.append(bomb)
    nbformat.write(nb, str(path))


def shape_clobbering(path: Path) -> None:
    """The written answer moved to the top, with one empty heading per other grade cell, named after it."""
    import nbformat
    nb = nbformat.read(str(path), 4)
    grade_ids = [c.metadata.get("nbgrader", {}).get("grade_id") for c in nb.cells]
    written = next(i for i, c in enumerate(nb.cells) if c.cell_type == "markdown"
                   and c.metadata.get("nbgrader", {}).get("solution"))
    cell = nb.cells.pop(written)
    cell.source += "".join(f'\n<h6 id="{g}" class="hidden"></h6>' for g in grade_ids if g)
    nb.cells.insert(0, cell)
    nbformat.write(nb, str(path))


SHAPED = ("lexer_bomb_57_bytes", "lexer_bomb_61_bytes", "clobbering_ids", "nested_87000_tags")
BIG_OUTPUT = "\nfrom IPython.display import HTML, display\ndisplay(HTML('<b>' * 87000))\n"


def build_shaped(course: Path, base: int, shaped: bool) -> list[str]:
    """``base`` correct submissions, then four more: the shaped ones (their answers correct too) with
    ``shaped``, plain correct ones without (the control grades as many notebooks)."""
    new_course(course)
    course_handle = Course.at(course)
    answers = examples.answers_for(course_handle, ())
    students = []
    for i in range(base + (0 if shaped else len(SHAPED))):
        examples.write_submission(course_handle, f"s{i:03d}_correct", answers)
        students.append(f"s{i:03d}_correct")
    if shaped:
        for pairs in (28, 30):
            folder = examples.write_submission(course_handle, f"lexer_bomb_{pairs * 2 + 1}_bytes", answers)
            shape_lexer_bomb(folder / NOTEBOOK, pairs)
        shape_clobbering(examples.write_submission(course_handle, "clobbering_ids", answers) / NOTEBOOK)
        examples.write_submission(course_handle, "nested_87000_tags",
                                  {**answers, rlhf_catalogue.PPO_CELL: answers[rlhf_catalogue.PPO_CELL] + BIG_OUTPUT})
        students += list(SHAPED)
    return students


def timed(command: list[str], cwd: Path, must_succeed: bool = True) -> float:
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
               RLHF_ALLOW_STOCK_AUTOGRADE="1")  # stock autograde, on purpose: it is the comparison
    start = time.perf_counter()
    proc = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True)
    if proc.returncode and must_succeed:
        raise RuntimeError(f"{' '.join(command)} failed:\n{proc.stderr[-3000:]}")
    return time.perf_counter() - start


def floor_seconds(count: int, workers: int) -> float:
    """The floor on this machine: ``count`` fresh sandboxes that only start Python and import torch,
    ``workers`` at a time, as the grader starts them (same bwrap, limits, uids and cgroups)."""
    from concurrent.futures import ThreadPoolExecutor

    from rlhf_course.course.limits import Limits

    from rlhf_course.grading.sandbox.sandbox import CGROUPS, FIRST_UID, bwrap_command, claim_slot, limited_command, sandbox_env

    limits = Limits()
    program = [os.path.join(sys.prefix, "bin", "python"), "-c", "import torch"]

    def one(index: int) -> None:
        slot, fd = claim_slot(index % workers)
        try:
            command = limited_command(bwrap_command(FIRST_UID + slot, sandbox_env(), limits, program), limits,
                                      CGROUPS.prepare(slot, limits))
            subprocess.run(command, check=True, capture_output=True)
        finally:
            os.close(fd)

    start = time.perf_counter()
    with ThreadPoolExecutor(max_workers=workers) as pool:
        list(pool.map(one, range(count)))
    return time.perf_counter() - start


def report_rows(course: Path) -> list[dict]:
    with open(course / "grading_report.csv") as handle:
        return list(csv.DictReader(handle))


def stage_breakdown(rows: list[dict]) -> dict[str, float]:
    """Mean seconds per stage of a trusted submission, from the grading report."""
    stages = [k for k in rows[0] if k.startswith("s: ")]
    return {k[3:]: sum(float(r[k] or 0) for r in rows) / len(rows) for k in stages}


def load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def trusted_batch(course: Path, workers: int) -> float:
    return timed([sys.executable, "-m", "rlhf_course.grading", "grade", "--workers", str(workers)], course)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size", type=int, default=24, help="honest submissions (at least 16: every style)")
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--no-hostile", action="store_true", help="skip the hostile submissions")
    parser.add_argument("--hostile-only", action="store_true", help="only the hostile submissions")
    parser.add_argument("--shaped-only", action="store_true", help="only the shaped notebooks against their control")
    parser.add_argument("--no-shaped", action="store_true", help="skip the shaped notebooks")
    parser.add_argument("--shaped-base", type=int, default=6, help="honest submissions in both shaped batches")
    parser.add_argument("--keep", action="store_true", help="keep the scratch courses")
    args = parser.parse_args()
    scratch = Path(tempfile.mkdtemp(prefix="bench-grading-"))
    nbgrader = [sys.executable, "-m", "nbgrader"]
    print(f"load average at the start: {load()} ({os.cpu_count()} cores)", flush=True)
    if not (args.hostile_only or args.shaped_only):
        honest(args, scratch, nbgrader)
    if not (args.no_hostile or args.shaped_only):
        hostile(args, scratch, nbgrader)
    failed = False
    if not (args.no_shaped or args.hostile_only):
        failed = not shaped(args, scratch)
    print(f"load average at the end: {load()}")
    if args.keep:
        print(f"scratch courses kept in {scratch}")
    else:
        shutil.rmtree(scratch, ignore_errors=True)
    return 1 if failed else 0


def honest(args, scratch: Path, nbgrader: list[str]) -> None:
    students = build_honest(scratch / "stock", args.size)
    build_honest(scratch / "ours", args.size)
    size = len(students)
    stock = {"autograde": timed(nbgrader + ["autograde", "rlhf", "--force"], scratch / "stock", must_succeed=False)}
    stock["feedback"] = timed(nbgrader + ["generate_feedback", "rlhf", "--force"], scratch / "stock", must_succeed=False)
    stock["export"] = timed(nbgrader + ["export"], scratch / "stock")
    load_stock = load()
    ours = trusted_batch(scratch / "ours", args.workers)
    load_ours = load()
    floor = floor_seconds(size, args.workers)
    load_floor = load()
    rows = report_rows(scratch / "ours")
    states = {}
    for row in rows:
        states[row["state"]] = states.get(row["state"], 0) + 1

    stock_all = sum(stock.values())
    wrong = len(rlhf_catalogue.WRONG_ANSWERS)
    print(f"\nhonest mix: {size} submissions of the real assignment ({wrong} wrong-answer styles, 1 partly wrong, "
          f"1 empty, {size - wrong - 2} correct); trusted outcomes: "
          + ", ".join(f"{k} {v}" for k, v in sorted(states.items())))
    print(f"{'':<46}{'total s':>9}{'s/sub':>8}{'x old fl':>9}{'x stock ag':>11}  load (1/5/15 min)")

    def line(name: str, seconds: float, at_load: str = "") -> None:
        print(f"{name:<46}{seconds:>9.1f}{seconds / size:>8.2f}{seconds / floor:>9.2f}"
              f"{seconds / stock['autograde']:>11.2f}  {at_load}")
    line("stock autograde alone (one at a time)", stock["autograde"])
    line("stock autograde + feedback + export", stock_all, load_stock)
    line(f"trusted, {args.workers} workers (feedback + export incl.)", ours, load_ours)
    line(f"old floor: bwrap + torch, {args.workers} at a time", floor, load_floor)
    print(f"trusted: {ours / size:.2f} s a submission (target <= 0.5)   trusted / stock autograde: "
          f"{ours / stock['autograde']:.2f}x (target <= 0.15)   trusted / old floor: {ours / floor:.2f}x   "
          f"trusted / stock with feedback + export: "
          f"{ours / stock_all:.2f}x")
    print("one trusted submission, mean seconds per stage (worker time; the last two in the main process):")
    for stage, seconds in stage_breakdown(rows).items():
        print(f"  {stage:<36} {seconds:6.3f}")


def hostile(args, scratch: Path, nbgrader: list[str]) -> None:
    hostile = build_hostile(scratch / "hostile-ours")
    build_hostile(scratch / "hostile-stock")
    ours_hostile = trusted_batch(scratch / "hostile-ours", args.workers)
    per_student = {r["student"]: r for r in report_rows(scratch / "hostile-ours")}
    print(f"\nhostile: {len(hostile)} submissions (rlhf_catalogue.ADVERSARIAL); trusted batch, {args.workers} workers: "
          f"{ours_hostile:.1f} s ({load()} load)")
    print(f"{'submission':<36}{'trusted s':>10}  {'state':<20}{'stock s':>9}  (stock: one autograde --student, "
          f"cell timeout of nbgrader_config.py)")
    for student in hostile:
        row = per_student[student]
        if student in UNSAFE_UNDER_STOCK:
            stock_text = f"{'-':>9}  not run: {UNSAFE_UNDER_STOCK[student]}"
        elif student in LOOPING:
            stock_text = f"{'-':>9}  {stock_loop_estimate(scratch / 'hostile-stock')}"
        else:
            seconds = timed(nbgrader + ["autograde", "rlhf", "--force", f"--student={student}"],
                            scratch / "hostile-stock", must_succeed=False)
            stock_text = f"{seconds:>9.1f}"
        print(f"{student:<36}{float(row['seconds']):>10.1f}  {row['state']:<20}{stock_text}", flush=True)


def shaped(args, scratch: Path) -> bool:
    """Two batches alternating twice: honest only, and honest + the shaped notebooks.  True on target."""
    runs: dict[bool, list[float]] = {False: [], True: []}
    for round_ in (1, 2):
        for with_shaped in (False, True):
            course = scratch / f"shaped-{int(with_shaped)}-{round_}"
            build_shaped(course, args.shaped_base, with_shaped)
            runs[with_shaped].append(trusted_batch(course, args.workers))
    rows = {r["student"]: r for r in report_rows(scratch / "shaped-1-2")}
    without, with_ = min(runs[False]), min(runs[True])
    print(f"\nshaped notebooks (issue #35), {args.workers} workers: {args.shaped_base} honest submissions + the "
          f"{len(SHAPED)} shaped ones, against {args.shaped_base + len(SHAPED)} honest ones ({load()} load):")
    print(f"  batch without them: {', '.join(f'{x:.1f}' for x in runs[False])} s; with them: "
          f"{', '.join(f'{x:.1f}' for x in runs[True])} s; best of each: +{with_ - without:.1f} s (target <= 2 s)")
    for student in SHAPED:
        row = rows[student]
        page = float(row.get("s: feedback page (HTML)") or 0)
        print(f"  {student:<22} {row['state']:<14} {row['score']:>5} / {row['max_score']:<5} worker {float(row['seconds']):.1f} s, "
              f"page {page:.2f} s  {(row.get('review_flags') or row.get('detail') or '')[:90]}")
    return with_ - without <= 2.0


if __name__ == "__main__":
    raise SystemExit(main())
