"""The GRPO assignment's costs, measured side by side in one run:

    lab       the quick setting on the reference functions: SFT + reward model (shared with the PPO lab),
              then GRPO, then the PPO lab's PPO stage on the same models, for the ratio GRPO / PPO
    grading   a class of GRPO submissions (the reference, every catalogued wrong answer, every correct
              variant): trusted grading (sandboxed, parallel; needs root and bubblewrap) against stock
              ``nbgrader autograde``, seconds per submission

    python bench/grpo.py [--workers 2] [--no-grading]

Targets (issue #30): the quick GRPO setting under 20 s on 2 cores (SFT and reward model included).
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path
from rlhf_course.course.settings import Course

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO), str(REPO / "instructor")]


def bench_lab() -> None:
    import torch
    from rlhf_course.lab import grpo, train
    from rlhf_course.lab.notebook_functions import functions_from_notebook
    from rlhf_course.lab.student import StudentFunctions

    torch.set_num_threads(min(2, os.cpu_count() or 1))
    source = REPO / "source"
    advantages = functions_from_notebook(source / "grpo" / "grpo.ipynb", ("group_relative_advantages",))
    others = grpo.find_other_functions(source / "grpo")
    start = time.perf_counter()
    result = grpo.run_lab(**advantages, **others, show_progress=False)
    whole = time.perf_counter() - start
    print(f"GRPO lab, quick setting: {whole:.1f} s in all ("
          + ", ".join(f"{k} {v:.1f} s" for k, v in result.seconds.items()) + "); target under 20 s")
    print(result.summary())
    # The PPO lab's PPO stage on models trained the same way, for comparison.
    rlhf = functions_from_notebook(source / "rlhf" / "rlhf_building_blocks.ipynb",
                                   ("ppo_clipped_objective", "dpo_loss", "compute_gae"))
    config = train.LabConfig.setting("quick")
    torch.manual_seed(config.seed)
    generator = torch.Generator().manual_seed(config.seed)
    sft = train.train_sft(config, generator, False)
    reward_model, _ = train.train_reward_model(sft, config, generator, False)
    start = time.perf_counter()
    train.ppo_rlhf(sft, reward_model, StudentFunctions.wrap(**rlhf), config, generator, False)
    ppo = time.perf_counter() - start
    print(f"PPO stage of the PPO lab, same models: {ppo:.1f} s; GRPO / PPO = {result.seconds['GRPO'] / ppo:.2f}")


def new_course(course: Path) -> Path:
    """A scratch course directory: the instructor's inputs (``rlhf_course.COURSE_FILES``), nothing generated."""
    from rlhf_course import copy_course_files
    course.mkdir(parents=True)
    return copy_course_files(course, REPO)


def bench_grading(workers: int) -> None:
    import grpo_catalogue as catalogue
    from rlhf_course.grading import batch
    from rlhf_course.course import notebooks
    from rlhf_course.grading import examples, release
    from rlhf_course.grading.sandbox.sandbox import sandbox_available

    course = new_course(Path(tempfile.mkdtemp(prefix="bench-grpo-")) / "course")
    course_handle = Course.at(course)
    release.generate_release(course_handle, ["grpo"])
    reference = notebooks.solution_answers(notebooks.read(course / "source" / "grpo" / "grpo.ipynb"))
    sources = {"reference": None, **{w.name: w.source for w in catalogue.WRONG_ANSWERS},
               **{v.name: v.source for v in catalogue.CORRECT_VARIANTS}}
    for student, source in sources.items():
        answers = dict(reference, **({"grpo_answer": source} if source else {}))
        examples.write_submission(course_handle, student, answers, assignment="grpo", notebook="grpo.ipynb")
    count = len(sources)
    problem = sandbox_available()
    if problem:
        print(f"trusted grading skipped: {problem}")
    else:
        start = time.perf_counter()
        results = batch.grade_all(course_handle, workers=workers, show_progress=False, assignments=["grpo"])
        trusted = time.perf_counter() - start
        states = sorted({r.state for r in results})
        print(f"trusted grading: {count} submissions in {trusted:.1f} s on {workers} workers, "
              f"{trusted / count:.2f} s each ({states})")
    start = time.perf_counter()
    examples.autograde(course_handle, assignment="grpo")
    stock = time.perf_counter() - start
    print(f"stock nbgrader autograde: {count} submissions in {stock:.1f} s, {stock / count:.2f} s each")
    if not problem:
        print(f"trusted / stock = {trusted / stock:.2f}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--no-grading", action="store_true")
    args = parser.parse_args()
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    bench_lab()
    if not args.no_grading:
        bench_grading(args.workers)
    print(f"load average {os.getloadavg()[0]:.1f} after")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
