"""The PPO/DPO lab: a tiny language model trained with RLHF, driven by the student's three functions.

    python -m rlhf_course.lab.ppo_dpo student/rlhf/rlhf_building_blocks.ipynb [--setting quick|full] [--out DIR]

Stages: SFT on a toy sentiment language -> a Bradley-Terry reward model -> PPO-RLHF against it
-> DPO on gold-labelled pairs.  Prints the metrics, writes ``ppo.png``, ``dpo.png`` and
``metrics.json`` into ``--out``.
"""
from __future__ import annotations

import argparse
import gc
import json
import os
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable

import torch

from rlhf_course import STUDENT_FUNCTIONS
from rlhf_course.i18n import plot_text, t
from rlhf_course.lab import SETTINGS, notebook_setting, train
from rlhf_course.lab.model import parameter_count
from rlhf_course.lab.notebook_functions import functions_from_notebook
from rlhf_course.lab.shared_stages import sft_and_reward_model
from rlhf_course.lab.student import StudentFunctionError, StudentFunctions, check_before_training
from rlhf_course.lab.threads import lab_threads
from rlhf_course.lab.training_slots import TrainingQueue, training_slot

# Two threads on the course machines (2 cores): faster alone (bench/demo.py measures one thread against two;
# figures in bench/RESULTS.md), but never more than the CPUs this process may use (its affinity and its
# cgroup's quota: one core per user on the hub, where two threads ran slower than one); RLHF_LAB_THREADS=1
# for every run when another process is busy on the other core (the test suite sets it when two test
# processes share the cores).
DEFAULT_THREADS = lab_threads()


@dataclass
class DemoResult:
    config: train.LabConfig
    reward_model: train.RewardModelReport
    ppo_history: list[dict]
    ppo_samples: dict
    dpo_history: list[dict]
    parameters: int
    seconds: dict[str, float] = field(default_factory=dict)      # wall time per stage
    cpu_seconds: dict[str, float] = field(default_factory=dict)  # CPU time per stage (all threads)

    def summary(self) -> dict[str, float]:
        first, last = self.ppo_history[0], self.ppo_history[-1]
        dpo_first, dpo_last = self.dpo_history[0], self.dpo_history[-1]
        return {
            "reward_model_heldout_accuracy": self.reward_model.heldout_accuracy,
            "ppo_reward_model_score": (first["reward_model_score"], last["reward_model_score"]),
            "ppo_gold_reward": (first["gold_reward"], last["gold_reward"]),
            "ppo_kl_to_reference": (first["kl_to_reference"], last["kl_to_reference"]),
            "ppo_entropy_per_token": (first["entropy_per_token"], last["entropy_per_token"]),
            "dpo_implicit_reward_margin": (dpo_first["implicit_reward_margin"], dpo_last["implicit_reward_margin"]),
            "dpo_preference_accuracy": (dpo_first["preference_accuracy"], dpo_last["preference_accuracy"]),
            "dpo_gold_reward": (dpo_first["gold_reward"], dpo_last["gold_reward"]),
        }


def run_demo(ppo_clipped_objective: Callable, dpo_loss: Callable, compute_gae: Callable,
             setting: str = "quick", show_progress: bool = True, threads: int | None = DEFAULT_THREADS,
             queue: TrainingQueue | None = None, **overrides) -> DemoResult:
    """Run SFT, reward model, PPO and DPO with the given functions; raise StudentFunctionError on a bug.
    The training waits for a slot of ``queue`` (by default the machine's, where the hub set one up:
    rlhf_course/lab/training_slots.py); the functions' checks do not."""
    if threads:
        torch.set_num_threads(threads)
    config = train.LabConfig.setting(setting, **overrides)
    student = StudentFunctions.wrap(ppo_clipped_objective, dpo_loss, compute_gae)
    for warning in check_before_training(student):  # raises first if a function cannot run at all
        print(t("Warning: {warning}", warning=warning))
    seconds, cpu_seconds = {}, {}

    def timed(name, fn, *args, **kwargs):
        start, cpu_start = time.perf_counter(), time.process_time()
        out = fn(*args, **kwargs)
        seconds[name] = time.perf_counter() - start
        cpu_seconds[name] = time.process_time() - cpu_start
        return out

    with training_slot(queue):
        # the same for every student: trained once per machine where RLHF_LAB_CACHE names a cache (make hub)
        shared = timed("sft_and_reward_model", sft_and_reward_model, config, show_progress)
        sft, reward_model, report, generator = shared.sft, shared.reward_model, shared.report, shared.generator
        _, ppo_history, samples = timed("ppo", train.ppo_rlhf, sft, reward_model, student, config, generator,
                                        show_progress)
        pairs = timed("dpo_data", train.sample_preferences, sft, config.dpo_pairs, generator)
        _, dpo_history = timed("dpo", train.dpo_train, sft, reward_model, pairs, student, config, generator,
                               show_progress)
    return DemoResult(config, report, ppo_history, samples, dpo_history, parameter_count(sft), seconds, cpu_seconds)


def run_in_notebook(ppo_clipped_objective: Callable, dpo_loss: Callable, compute_gae: Callable) -> DemoResult | None:
    """The notebook's entry point: one readable line instead of a traceback when a function is not
    ready.  Skipped while nbgrader runs the notebook (validate, autograde): grading stays fast,
    and the lab is for the student to watch.  ``RLHF_LAB_SETTING`` (quick, full or smoke) picks the
    run's length: quick unless set; the browser tests use smoke (a few steps)."""
    if os.environ.get("NBGRADER_EXECUTION"):
        print(t("(the lab is skipped while nbgrader runs this notebook: run it yourself in JupyterLab)"))
        return None
    try:
        result = run_demo(ppo_clipped_objective, dpo_loss, compute_gae,
                          setting=notebook_setting())
    except StudentFunctionError as exc:
        print(t("The lab stopped: {reason}", reason=exc))
        return None
    print(format_summary(result))
    # The training leaves many surviving objects behind, and Python's next full collection (0.2 CPU-s in a
    # kernel after training) would fall on whatever cell allocates next: the plots below, which thirty students
    # run at once.  Collected here, inside the training cell, which the class's training slots pace.
    gc.collect()
    return result


def show_in_notebook(result: DemoResult | None) -> None:
    if result is None:
        if not os.environ.get("NBGRADER_EXECUTION"):
            print(t("Run the lab above once all three functions pass their visible tests."))
        return
    from rlhf_course import figure_output
    from rlhf_course.lab.plots import plot_dpo_history, plot_ppo_history
    for plot, history in ((plot_ppo_history, result.ppo_history), (plot_dpo_history, result.dpo_history)):
        plot(history)
        figure_output.show()


def save_figures(result: DemoResult, out_dir: Path) -> list[Path]:
    import matplotlib.pyplot as plt
    from rlhf_course.lab.plots import plot_dpo_history, plot_ppo_history

    out_dir.mkdir(parents=True, exist_ok=True)
    paths = []
    for name, plot, history, title in (
            ("ppo.png", plot_ppo_history, result.ppo_history, "PPO-RLHF on the tiny LM"),
            ("dpo.png", plot_dpo_history, result.dpo_history, "DPO on the tiny LM")):
        fig, axes = plt.subplots(1, 3, figsize=(14, 3.8), constrained_layout=True)
        plot(history, axes)
        fig.suptitle(plot_text(title))
        fig.savefig(out_dir / name, dpi=110)
        plt.close(fig)
        paths.append(out_dir / name)
    return paths


def format_summary(result: DemoResult) -> str:
    """The lab's outcome as text, in the notebook's language (numbers, prompts and responses as they are)."""
    lines = [t("tiny LM: {parameters:,} parameters; stage times (s): ", parameters=result.parameters)
             + ", ".join(f"{t(k)} {v:.1f}" for k, v in result.seconds.items())]
    for key, value in result.summary().items():
        label = t(key)
        pad = " " * max(0, 32 - _display_width(label))
        if isinstance(value, tuple):
            lines.append(f"  {label}{pad} {value[0]:8.3f} -> {value[1]:8.3f}")
        else:
            lines.append(f"  {label}{pad} {value:8.3f}")
    for when in ("before", "after"):
        lines.append(t(f"PPO samples {when}:"))
        for sample in result.ppo_samples[when][:3]:
            lines.append(f"  [{sample['prompt']}] {sample['response']}   "
                         + t("(RM {rm:+.2f}, gold {gold:+.2f})", rm=sample["reward_model_score"], gold=sample["gold_reward"]))
    return "\n".join(lines)


def _display_width(text: str) -> int:
    """Columns a terminal gives the text: a CJK character takes two."""
    import unicodedata
    return sum(2 if unicodedata.east_asian_width(ch) in "WF" else 1 for ch in text)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("notebook", type=Path, help="a notebook whose answer cells define the three functions")
    parser.add_argument("--setting", default="quick", choices=SETTINGS)
    parser.add_argument("--out", type=Path, default=Path("outputs/demo"))
    args = parser.parse_args(argv)
    try:
        functions = functions_from_notebook(args.notebook, STUDENT_FUNCTIONS)
        result = run_demo(**functions, setting=args.setting, show_progress=sys.stderr.isatty() or "CI" not in os.environ)
    except (StudentFunctionError, LookupError) as exc:
        print(t("demo stopped: {reason}", reason=exc), file=sys.stderr)
        return 2
    print(format_summary(result))
    paths = save_figures(result, args.out)
    (args.out / "metrics.json").write_text(json.dumps(
        {"config": asdict(result.config),
         "reward_model": {"heldout_accuracy": result.reward_model.heldout_accuracy,
                          "train_accuracy": result.reward_model.train_accuracy},
         "ppo": result.ppo_history, "dpo": result.dpo_history, "samples": result.ppo_samples,
         "seconds": result.seconds}, indent=1))
    print(t("figures:"), ", ".join(str(p) for p in paths))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
