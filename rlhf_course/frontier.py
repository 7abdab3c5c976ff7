"""Reward hacking and the reward-KL frontier, PPO against DPO, on the tiny LM.

    python -m rlhf_course.frontier [--notebook PATH] [--out notebooks/frontier_results.json]

From one SFT policy and one reward model, PPO runs at several KL coefficients (0 included) and
DPO runs at several betas, a few seeds each; every run ends with the gold reward and the KL to
the reference of fresh samples.  The KL-free PPO run also keeps its whole history (reward-model
score against gold reward) and sampled responses before and after.  Results go to a JSON file the
companion notebook plots from; the same command regenerates them exactly (seeded).
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Callable

import numpy as np
import torch
from tqdm.auto import tqdm

from rlhf_course import ASSIGNMENT, COURSE_ROOT, NOTEBOOK, STUDENT_FUNCTIONS
from rlhf_course.lab import language, train
from rlhf_course.lab.student import StudentFunctions

DEFAULT_OUT = COURSE_ROOT / "notebooks" / "frontier_results.json"


@dataclass(frozen=True)
class SweepConfig:
    kl_coefs: tuple[float, ...] = (0.0, 0.003, 0.01, 0.05, 0.2)
    dpo_betas: tuple[float, ...] = (0.05, 0.1, 0.5)
    seeds: tuple[int, ...] = (1, 2)
    ppo_iterations: int = 70
    ppo_batch: int = 48
    dpo_steps: int = 120
    eval_batch: int = 256
    threads: int = 2


def fit_gao(kl: np.ndarray, gold: np.ndarray) -> tuple[float, float]:
    """Least-squares fit of Gao et al.'s gold(d) = d (alpha - beta log d), d = sqrt(KL)."""
    d = np.sqrt(np.maximum(kl, 1e-8))
    design = np.stack([d, -d * np.log(d)], axis=1)
    (alpha, beta), *_ = np.linalg.lstsq(design, gold, rcond=None)
    return float(alpha), float(beta)


def _final_point(policy, reference, reward_model, seed: int, eval_batch: int) -> dict:
    generator = torch.Generator().manual_seed(10_000 + seed)
    prompts = language.sample_prompts(eval_batch, generator)
    return train.evaluate_policy(policy, reference, reward_model, prompts, generator)


def run_sweep(ppo_clipped_objective: Callable, dpo_loss: Callable, compute_gae: Callable,
              sweep: SweepConfig = SweepConfig(), show_progress: bool = True) -> dict:
    """Every run of the sweep; a plain dict, ready for JSON."""
    torch.set_num_threads(sweep.threads)
    student = StudentFunctions.wrap(ppo_clipped_objective, dpo_loss, compute_gae)
    base = train.LabConfig.setting("quick", ppo_iterations=sweep.ppo_iterations, ppo_batch=sweep.ppo_batch,
                                   dpo_steps=sweep.dpo_steps, eval_every=10 ** 6)
    start = time.perf_counter()
    torch.manual_seed(base.seed)
    generator = torch.Generator().manual_seed(base.seed)
    sft = train.train_sft(base, generator, show_progress=False)
    reward_model, report = train.train_reward_model(sft, base, generator, show_progress=False)
    pairs = train.sample_preferences(sft, base.dpo_pairs, generator)
    reference = train.frozen_copy(sft)
    runs, hacking = [], None
    jobs = [("ppo", kl, seed) for kl in sweep.kl_coefs for seed in sweep.seeds] + \
           [("dpo", beta, seed) for beta in sweep.dpo_betas for seed in sweep.seeds]
    for method, setting, seed in tqdm(jobs, desc="sweep", disable=not show_progress):
        torch.manual_seed(seed)
        run_generator = torch.Generator().manual_seed(seed)
        if method == "ppo":
            policy, history, samples = train.ppo_rlhf(sft, reward_model, student, base, run_generator,
                                                      show_progress=False, kl_coef=setting)
            if setting == 0.0 and hacking is None:
                hacking = {"seed": seed, "history": history, "samples": samples}
        else:
            policy, history = train.dpo_train(sft, reward_model, pairs, student, base, run_generator,
                                              show_progress=False, beta=setting)
        point = _final_point(policy, reference, reward_model, seed, sweep.eval_batch)
        runs.append({"method": method, "setting": setting, "seed": seed, **point})
    return {"sweep": asdict(sweep), "reward_model_heldout_accuracy": report.heldout_accuracy,
            "sft": _final_point(sft, reference, reward_model, 0, sweep.eval_batch),
            "runs": runs, "kl_free_ppo": hacking, "seconds": time.perf_counter() - start}


# ----------------------------------------------------------------------------- reading results

def summarise(results: dict) -> dict:
    """The numbers the notebook discusses and the tests assert on."""
    hacking = results["kl_free_ppo"]["history"]
    gold = [row["gold_reward"] for row in hacking]
    proxy = [row["reward_model_score"] for row in hacking]
    window = 5
    smooth = lambda xs: [sum(xs[max(0, i - window + 1):i + 1]) / len(xs[max(0, i - window + 1):i + 1])  # noqa: E731
                         for i in range(len(xs))]
    gold_s, proxy_s = smooth(gold), smooth(proxy)
    by_setting: dict = {}
    for run in results["runs"]:
        by_setting.setdefault((run["method"], run["setting"]), []).append(run)
    means = {f"{m}@{s:g}": {k: float(np.mean([r[k] for r in rs])) for k in ("gold_reward", "kl_to_reference",
                                                                           "reward_model_score")}
             for (m, s), rs in by_setting.items()}
    return {"kl_free_gold_peak": max(gold_s), "kl_free_gold_end": gold_s[-1],
            "kl_free_proxy_peak": max(proxy_s), "kl_free_proxy_end": proxy_s[-1], "means": means}


def ppo_frontier(results: dict):
    """The upper envelope of the PPO points (mean over seeds), sorted by KL: (kl, gold) arrays."""
    means = summarise(results)["means"]
    points = sorted((v["kl_to_reference"], v["gold_reward"]) for k, v in means.items() if k.startswith("ppo"))
    kl, gold = [], []
    for x, y in [(0.0, results["sft"]["gold_reward"])] + points:
        kl.append(x)
        gold.append(max([y] + gold[-1:]))  # best gold reached at or below this KL
    return np.array(kl), np.array(gold)


def distance_below_frontier(results: dict, method: str = "dpo") -> dict[str, float]:
    """For each setting of ``method``: how far its mean gold lies below the PPO frontier at its KL."""
    kl, gold = ppo_frontier(results)
    out = {}
    for key, value in summarise(results)["means"].items():
        if key.startswith(method):
            out[key] = float(np.interp(value["kl_to_reference"], kl, gold) - value["gold_reward"])
    return out


# ----------------------------------------------------------------------------- plots

def plot_frontier(results: dict, ax=None):
    """Final gold reward against KL to the reference: PPO (circles, by KL coefficient), DPO
    (triangles, by beta), every seed, the SFT start, and the PPO frontier."""
    import matplotlib.pyplot as plt
    if ax is None:
        _, ax = plt.subplots(figsize=(7, 4.6), constrained_layout=True)
    cmap_ppo, cmap_dpo = plt.get_cmap("Blues"), plt.get_cmap("Oranges")
    kls = results["sweep"]["kl_coefs"]
    betas = results["sweep"]["dpo_betas"]
    for run in results["runs"]:
        if run["method"] == "ppo":
            shade = cmap_ppo(0.35 + 0.6 * kls.index(run["setting"]) / max(1, len(kls) - 1))
            ax.scatter(run["kl_to_reference"], run["gold_reward"], marker="o", s=55, color=shade, edgecolor="k",
                       lw=0.5, label=f"PPO, KL coef {run['setting']:g}" if run["seed"] == results["sweep"]["seeds"][0] else None)
        else:
            shade = cmap_dpo(0.35 + 0.6 * betas.index(run["setting"]) / max(1, len(betas) - 1))
            ax.scatter(run["kl_to_reference"], run["gold_reward"], marker="^", s=70, color=shade, edgecolor="k",
                       lw=0.5, label=f"DPO, beta {run['setting']:g}" if run["seed"] == results["sweep"]["seeds"][0] else None)
    kl, gold = ppo_frontier(results)
    ax.plot(kl, gold, "--", color="tab:blue", alpha=0.6, label="PPO frontier (best gold so far)")
    ax.scatter([results["sft"]["kl_to_reference"]], [results["sft"]["gold_reward"]], marker="s", color="gray",
               label="SFT policy (start)")
    ax.set(title="Gold reward against KL to the reference", xlabel="KL(pi || pi_ref) per response (nats)",
           ylabel="gold reward of fresh samples")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7.5, loc="lower right", ncol=2)
    return ax


def plot_overoptimisation(results: dict, axes=None):
    """The KL-free PPO run: reward-model score (proxy) and gold reward over training, and gold
    against d = sqrt(KL) with Gao et al.'s fit."""
    import matplotlib.pyplot as plt
    if axes is None:
        _, axes = plt.subplots(1, 2, figsize=(12, 4.2), constrained_layout=True)
    history = results["kl_free_ppo"]["history"]
    steps = [row["iteration"] for row in history]
    ax = axes[0]
    ax.plot(steps, [row["reward_model_score"] for row in history], color="tab:blue", label="reward-model score (proxy)")
    ax.set(title="KL-free PPO: the proxy climbs, the gold reward falls", xlabel="PPO iteration",
           ylabel="reward-model score (SFT std units)")
    twin = ax.twinx()
    twin.plot(steps, [row["gold_reward"] for row in history], color="tab:orange", label="gold reward (truth)")
    twin.set(ylabel="gold reward")
    lines = ax.get_lines() + twin.get_lines()
    ax.legend(lines, [line.get_label() for line in lines], loc="lower right", fontsize=8)
    ax.grid(alpha=0.3)
    kl = np.array([row["kl_to_reference"] for row in history])
    gold = np.array([row["gold_reward"] for row in history])
    gold = gold - gold[0]
    alpha, beta = fit_gao(kl, gold)
    d = np.sqrt(np.maximum(kl, 0))
    grid = np.linspace(1e-3, d.max(), 100)
    axes[1].scatter(d, gold, s=12, color="tab:orange", label="gold gain per iteration")
    axes[1].plot(grid, grid * (alpha - beta * np.log(grid)), color="black",
                 label=f"fit d(alpha - beta log d), alpha={alpha:.2f}, beta={beta:.2f}")
    axes[1].set(title="Over-optimisation (Gao et al. 2022 form)", xlabel="d = sqrt(KL to reference)",
                ylabel="gold reward gain over the SFT policy")
    axes[1].grid(alpha=0.3)
    axes[1].legend(fontsize=8)
    return axes


def format_samples(results: dict) -> str:
    lines = []
    for when in ("before", "after"):
        lines.append(f"KL-free PPO, {when}:")
        for sample in results["kl_free_ppo"]["samples"][when]:
            lines.append(f"  [{sample['prompt']}] {sample['response']}   "
                         f"(RM {sample['reward_model_score']:+.2f}, gold {sample['gold_reward']:+.2f})")
    return "\n".join(lines)


# ----------------------------------------------------------------------------- CLI

def load_or_run(path: Path = DEFAULT_OUT, functions: dict | None = None) -> dict:
    """The cached results if present, else run the sweep (about a minute) and cache it."""
    if path.is_file():
        return json.loads(path.read_text())
    if functions is None:
        raise FileNotFoundError(f"{path} is missing: run `python -m rlhf_course.frontier` first")
    results = run_sweep(**functions)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(results, indent=1))
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--notebook", type=Path, default=COURSE_ROOT / "source" / ASSIGNMENT / NOTEBOOK,
                        help="a completed notebook whose functions drive the sweep (default: the reference)")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = parser.parse_args(argv)
    from rlhf_course.grading.notebooks import functions_from_notebook
    from rlhf_course.lab.student import StudentFunctionError
    try:
        results = run_sweep(**functions_from_notebook(args.notebook, STUDENT_FUNCTIONS))
    except (StudentFunctionError, LookupError) as exc:
        print(f"sweep stopped: {exc}", file=sys.stderr)
        return 2
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=1))
    summary = summarise(results)
    print(f"{len(results['runs'])} runs in {results['seconds']:.1f} s -> {args.out}")
    print(f"KL-free PPO: gold peak {summary['kl_free_gold_peak']:.3f}, end {summary['kl_free_gold_end']:.3f}; "
          f"proxy peak {summary['kl_free_proxy_peak']:.3f}, end {summary['kl_free_proxy_end']:.3f}")
    for key, value in summary["means"].items():
        print(f"  {key:<10} gold {value['gold_reward']:+.3f}  KL {value['kl_to_reference']:6.2f}")
    print("DPO below the PPO frontier by:", {k: round(v, 3) for k, v in distance_below_frontier(results).items()})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
