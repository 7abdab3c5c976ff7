"""Stock ``nbgrader autograde`` against our trusted, sandboxed batch grader, side by side.

Both grade the same batch of the real assignment (correct, wrong and broken submissions) in
two fresh copies of the course, then write feedback and export grades:

    stock: nbgrader autograde + nbgrader generate_feedback + nbgrader export   (one at a time)
    ours:  python -m rlhf_course.grading.batch --workers N                     (sandboxed, parallel)

    python bench/grading.py [--size 24] [--workers 2]

Target: ours at most 0.33x the stock wall time on 2 cores.  Hanging submissions are left out of
the batch: stock nbgrader would spend its whole cell timeout on each.
"""
from __future__ import annotations

import argparse
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

import answer_catalogue  # noqa: E402
from rlhf_course import NOTEBOOK  # noqa: E402
from rlhf_course.grading import course as pipeline  # noqa: E402

BROKEN = ("patches_comparisons", "custom_exception_handler", "os_exit", "allocates_6_gib",
          "tampered_visible_test", "invalid_json")


def build_class(course: Path, size: int) -> list[str]:
    for name in ("source", "instructor", "nbgrader_config.py"):
        src = REPO / name
        (shutil.copytree if src.is_dir() else shutil.copy2)(src, course / name)
    pipeline.generate_release(course)
    plan = [("correct", None)] * 8 + [(w.name, "wrong") for w in answer_catalogue.WRONG_ANSWERS[:10]] + \
        [(name, "broken") for name in BROKEN]
    plan = (plan * (size // len(plan) + 1))[:size]
    attacks = {a.name: a for a in answer_catalogue.ADVERSARIAL}
    students = []
    for i, (name, kind) in enumerate(plan):
        student = f"s{i:03d}_{name}"
        if kind == "broken":
            attack = attacks[name]
            folder = pipeline.write_submission(course, student, {**pipeline.answers_for(course, ()), **attack.answers})
            if attack.tamper:
                answer_catalogue.tamper_notebook(folder / NOTEBOOK, attack.tamper)
        else:
            pipeline.write_submission(course, student, pipeline.answers_for(course, (name,) if kind else ()))
        students.append(student)
    return students


def timed(command: list[str], cwd: Path, must_succeed: bool = True) -> float:
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
               RLHF_ALLOW_STOCK_AUTOGRADE="1")  # stock autograde, on purpose: it is the comparison
    start = time.perf_counter()
    proc = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True)
    if proc.returncode and must_succeed:
        raise RuntimeError(f"{' '.join(command)} failed:\n{proc.stderr[-3000:]}")
    if proc.returncode:  # stock nbgrader exits 1 when a submission could not be graded (invalid JSON)
        print(f"note: {' '.join(command[2:4])} exited {proc.returncode}")
    return time.perf_counter() - start


def floor_seconds(count: int, workers: int) -> float:
    """The floor on this machine: ``count`` fresh sandboxes that only start Python and import torch,
    ``workers`` at a time, as the grader starts them (same bwrap, limits and uids)."""
    from concurrent.futures import ThreadPoolExecutor

    from rlhf_course.grading.sandbox import CGROUPS, Limits, bwrap_command, limited_command, sandbox_env

    limits = Limits()
    program = [os.path.join(sys.prefix, "bin", "python"), "-c", "import torch"]

    def one(index: int) -> None:
        slot = index % workers
        command = limited_command(bwrap_command(61000 + slot, sandbox_env(), limits, program), limits,
                                  CGROUPS.prepare(slot, limits))
        subprocess.run(command, check=True, capture_output=True)

    start = time.perf_counter()
    with ThreadPoolExecutor(max_workers=workers) as pool:
        list(pool.map(one, range(count)))
    return time.perf_counter() - start


def stage_breakdown(course: Path) -> dict[str, float]:
    """Mean seconds per stage of a trusted submission, from the grading report."""
    import csv
    with open(course / "grading_report.csv") as handle:
        rows = list(csv.DictReader(handle))
    stages = [k for k in rows[0] if k.startswith("s: ")]
    return {k[3:]: sum(float(r[k] or 0) for r in rows) / len(rows) for k in stages}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size", type=int, default=24)
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    args = parser.parse_args()
    scratch = Path(tempfile.mkdtemp(prefix="bench-grading-"))
    stock_course, our_course = scratch / "stock", scratch / "ours"
    stock_course.mkdir(), our_course.mkdir()
    build_class(stock_course, args.size)
    build_class(our_course, args.size)
    nbgrader = [sys.executable, "-m", "nbgrader"]
    stock = {
        "autograde": timed(nbgrader + ["autograde", "rlhf", "--force"], stock_course, must_succeed=False),
        "feedback": timed(nbgrader + ["generate_feedback", "rlhf", "--force"], stock_course, must_succeed=False),
        "export": timed(nbgrader + ["export"], stock_course),
    }
    ours = timed([sys.executable, "-m", "rlhf_course.grading.batch", "--workers", str(args.workers)], our_course)
    floor = floor_seconds(args.size, args.workers)
    stock_total = sum(stock.values())
    print(f"batch: {args.size} submissions of the real assignment (8 correct, 10 wrong, 6 broken per 24)")
    print(f"stock nbgrader, one at a time: autograde {stock['autograde']:.1f} s + feedback {stock['feedback']:.1f} s "
          f"+ export {stock['export']:.1f} s = {stock_total:.1f} s ({stock_total / args.size:.2f} s per submission)")
    print(f"ours, sandboxed, {args.workers} workers: {ours:.1f} s ({ours / args.size:.2f} s per submission)")
    print(f"wall-time ratio ours / stock: {ours / stock_total:.2f}x  (autograde alone: {ours / stock['autograde']:.2f}x)")
    print(f"floor, {args.size} sandboxes that only import torch, {args.workers} at a time: {floor:.1f} s "
          f"({floor / args.size:.2f} s per submission); ours / floor: {ours / floor:.2f}x")
    print("one trusted submission, mean seconds per stage (worker time; the last two in the main process):")
    for stage, seconds in stage_breakdown(our_course).items():
        print(f"  {stage:<32} {seconds:6.2f}")
    shutil.rmtree(scratch, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
