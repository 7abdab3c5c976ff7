"""Reward hacking and the reward-KL frontier, PPO against DPO and against the exact optimum, on the tiny LM.

    python -m rlhf_course.lab.frontier [--notebook PATH] [--out notebooks/frontier_results.json]

One SFT transformer, one reward model (trained on pairs of SFT samples without repeated words) and
one set of preference pairs (exactly the pairs the reward model was trained on), shared by everything:

The reference policy is the bigram closest to the SFT transformer (fitted to its samples), for
which pi*_beta ∝ pi_ref exp(gold/beta) is computed exactly for every beta
(:mod:`rlhf_course.lab.exact_optimum`): the exact reward-KL frontier.  The trained policy is a
transformer whose logits are the bigram's plus a residual that starts at zero, so PPO (several KL
coefficients, 0 included), GRPO (several k3 weights, and one variant with the KL in the reward and no std
scaling) and DPO (several betas, on the reward model's own pairs) start from, and are regularised
towards, exactly that reference.  Every run ends with the gold reward and KL of
fresh samples and how far below the exact curve it lands; the KL-free PPO runs (over-optimisation)
also keep their whole history and sampled responses before and after.

Runs are independent (each seeded, one torch thread) and spread over ``workers`` forked processes.
The results go to a JSON file the companion notebook plots from.  Regenerated elsewhere the numbers
are not bit-identical (BLAS kernels differ across CPUs) but agree within the seed-to-seed spread.
"""
from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Callable

import numpy as np
import torch
from tqdm.auto import tqdm

from rlhf_course import ASSIGNMENT, COURSE_ROOT, NOTEBOOK, STUDENT_FUNCTIONS
from rlhf_course.i18n import padded, plot_text as L, t
from rlhf_course.lab import exact_optimum, grpo, language, shared_stages, train
from rlhf_course.lab.notebook_functions import functions_from_notebook
from rlhf_course.lab.student import StudentFunctions
from rlhf_course.lab.threads import usable_cpus

DEFAULT_OUT = COURSE_ROOT / "notebooks" / "frontier_results.json"


@dataclass(frozen=True)
class SweepConfig:
    kl_coefs: tuple[float, ...] = (0.0, 0.003, 0.01, 0.05, 0.2)
    dpo_betas: tuple[float, ...] = (0.1, 0.5, 2.0)
    grpo_kl_coefs: tuple[float, ...] = (0.05, 0.2, 1.0)  # the k3 weight in GRPO's loss
    grpo_group_size: int = 8
    # GRPO with its two departures from PPO's objective undone: the KL in the reward, no std scaling
    grpo_variant_kl_coefs: tuple[float, ...] = (0.05,)
    seeds: tuple[int, ...] = (1, 2)
    hacking_seeds: tuple[int, ...] = (1, 2, 3)
    ppo_iterations: int = 70
    ppo_batch: int = 48
    dpo_steps: int = 120
    eval_batch: int = 512
    bigram_samples: int = 8000
    bigram_smoothing: float = 0.5
    exact_betas: int = 300
    workers: int = 2


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


# ----------------------------------------------------------------------------- the sweep

_SHARED: dict = {}  # what every run needs; set before the worker processes fork


def _run_job(job: tuple[str, float | str, int]) -> dict:
    method, setting, seed = job
    cpu_start = time.process_time()
    torch.set_num_threads(1)
    s = _SHARED
    if method == "point":  # a policy that is not trained here, measured like the runs' end points
        policy = s["bigram_policy"] if setting == "start" else s["sft"]
        point = _final_point(policy, train.frozen_copy(s["bigram_policy"]), s["reward_model"], seed, s["eval_batch"])
        point["gap_below_exact"] = float(s["frontier"].best_reward_at(point["kl_to_reference"])[0]
                                         - point["gold_reward"])
        return {"method": method, "setting": setting, **point, "cpu_seconds": time.process_time() - cpu_start}
    torch.manual_seed(seed)
    generator = torch.Generator().manual_seed(seed)
    start = s["bigram_policy"]
    reference = train.frozen_copy(start)
    if method == "ppo":
        policy, history, samples = train.ppo_rlhf(start, s["reward_model"], s["student"], s["config"], generator,
                                                  show_progress=False, kl_coef=setting)
    elif method in ("grpo", "grpo_kl_in_reward_unscaled"):
        settings = {"kl_coef": setting} if method == "grpo" else {"kl_coef": setting, "kl_in": "reward",
                                                                  "scale_by_std": False}
        policy, _, _ = grpo.grpo_train(start, s["reward_model"], s["grpo_student"],
                                       replace(s["grpo_config"], **settings), generator, show_progress=False)
    else:
        policy, history = train.dpo_train(start, s["reward_model"], s["pairs"], s["student"], s["config"], generator,
                                          show_progress=False, beta=setting)
    point = _final_point(policy, reference, s["reward_model"], seed, s["eval_batch"])
    row = {"method": method, "setting": setting, "seed": seed, **point}
    row["gap_below_exact"] = float(s["frontier"].best_reward_at(point["kl_to_reference"])[0] - point["gold_reward"])
    if method == "ppo" and setting == 0.0:
        row["history"], row["samples"] = history, samples
    row["cpu_seconds"] = time.process_time() - cpu_start
    return row


def _jobs(sweep: SweepConfig, with_grpo: bool) -> list[tuple[str, float | str, int]]:
    """PPO first (the longer runs), then GRPO and DPO, then the two short measurements of the start and
    the SFT transformer, so that two workers finish together."""
    return ([("ppo", kl, seed) for kl in sweep.kl_coefs for seed in (sweep.hacking_seeds if kl == 0 else sweep.seeds)]
            + [("grpo", kl, seed) for kl in (sweep.grpo_kl_coefs if with_grpo else ()) for seed in sweep.seeds]
            + [("grpo_kl_in_reward_unscaled", kl, seed) for kl in (sweep.grpo_variant_kl_coefs if with_grpo else ())
               for seed in sweep.seeds]
            + [("dpo", beta, seed) for beta in sweep.dpo_betas for seed in sweep.seeds]
            + [("point", "start", 0), ("point", "sft_transformer", 0)])


def _schedule(durations: list[float], workers: int) -> float:
    """Makespan of ``durations`` taken in order, each by the first free of ``workers``."""
    free = [0.0] * max(1, workers)
    for d in durations:
        free[free.index(min(free))] += d
    return max(free)


def _can_fork() -> bool:
    return "fork" in multiprocessing.get_all_start_methods()


def run_sweep(ppo_clipped_objective: Callable, dpo_loss: Callable, compute_gae: Callable,
              sweep: SweepConfig = SweepConfig(), show_progress: bool = True,
              group_relative_advantages: Callable | None = None, kl_estimator_k3: Callable | None = None) -> dict:
    """Every run of the sweep; a plain dict, ready for JSON.  GRPO runs too when its two other
    functions are given (with the same ``ppo_clipped_objective``)."""
    # One torch thread per process: the runs are small, so two processes use two cores far better
    # than two threads in one (and forking after a multi-threaded torch call is unsafe).
    previous_threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        grpo_student = None
        if group_relative_advantages is not None and kl_estimator_k3 is not None:
            grpo_student = grpo.GrpoFunctions.wrap(group_relative_advantages, ppo_clipped_objective, kl_estimator_k3)
        return _run_sweep(StudentFunctions.wrap(ppo_clipped_objective, dpo_loss, compute_gae), sweep, show_progress,
                          grpo_student)
    finally:
        torch.set_num_threads(previous_threads)
        _SHARED.clear()


def _set_up(config: train.LabConfig, sweep: SweepConfig) -> dict:
    """What every run shares: the SFT transformer, the reward model and its pairs, the bigram
    reference and its exact frontier.  Returns them with the CPU seconds they took."""
    cpu_start = time.process_time()
    # The lab's SFT policy and reward model for this setting, loaded where RLHF_LAB_CACHE holds them (the same
    # numbers as trained, torch's and the generator's random state included: shared_stages), else trained here.
    stages = shared_stages.sft_and_reward_model(config, show_progress=False)
    sft, reward_model, report, generator = stages.sft, stages.reward_model, stages.report, stages.generator
    # The preference data: exactly the pairs the reward model is trained on, so PPO (through the
    # reward model) and DPO (directly) learn from the same labelled comparisons.
    pairs = report.training_pairs
    chosen, rejected = pairs.sequences()
    # Evidence that these are the reward model's pairs: it orders them exactly as on its training set.
    accuracy_on_pairs = (train.in_chunks(reward_model, chosen) > train.in_chunks(reward_model, rejected)).float().mean()
    # The bigram closest to the SFT policy: fitted to its samples (last prompt word, then the response).
    prompts = language.sample_prompts(sweep.bigram_samples, generator)
    responses = train.in_chunks(lambda p: sft.sample(p, language.RESPONSE_LENGTH, generator), prompts)
    transition = exact_optimum.fit_bigram(torch.cat([prompts[:, -1:], responses], 1), sweep.bigram_smoothing)
    reference = exact_optimum.toy_reference(transition)
    curve = exact_optimum.frontier(reference, exact_optimum.gold_step_rewards(),
                                   np.logspace(-3, 3, sweep.exact_betas))
    bigram_policy = exact_optimum.BigramResidualPolicy(transition, backbone_from=sft).eval()
    return {"sft": sft, "bigram_policy": bigram_policy, "reward_model": reward_model, "pairs": pairs,
            "frontier": curve, "transition": transition, "accuracy_on_pairs": accuracy_on_pairs.item(),
            "report": train.RewardModelReport(report.heldout_accuracy, report.train_accuracy),
            "cpu_seconds": time.process_time() - cpu_start}


def _run_sweep(student: StudentFunctions, sweep: SweepConfig, show_progress: bool,
               grpo_student: "grpo.GrpoFunctions | None" = None) -> dict:
    config = train.LabConfig.setting("quick", ppo_iterations=sweep.ppo_iterations, ppo_batch=sweep.ppo_batch,
                                     dpo_steps=sweep.dpo_steps, eval_every=10 ** 6)
    start = time.perf_counter()
    workers = max(1, min(sweep.workers, usable_cpus()))
    # One thread here too: the workers are forked from this process, and a fork after a
    # multi-threaded torch call can deadlock the child (a two-thread set-up in a forked child hung
    # when the parent had used two threads before: a test process, a notebook kernel).
    shared = _set_up(config, sweep)
    sft, bigram_policy, reward_model = shared["sft"], shared["bigram_policy"], shared["reward_model"]
    pairs, curve, transition, report = shared["pairs"], shared["frontier"], shared["transition"], shared["report"]
    # GRPO like for like with PPO: as many responses an iteration (prompts x group = PPO's batch), as
    # many iterations, epochs, learning rate and clip range.
    grpo_config = grpo.GrpoConfig(iterations=sweep.ppo_iterations, prompts=sweep.ppo_batch // sweep.grpo_group_size,
                                  group_size=sweep.grpo_group_size, epochs=config.ppo_epochs, lr=config.ppo_lr,
                                  clip_epsilon=config.clip_epsilon)
    _SHARED.update(sft=sft, bigram_policy=bigram_policy, reward_model=reward_model, pairs=pairs, student=student,
                   config=config, eval_batch=sweep.eval_batch, frontier=curve, grpo_student=grpo_student,
                   grpo_config=grpo_config)
    jobs = _jobs(sweep, grpo_student is not None)
    setup_seconds, setup_cpu = time.perf_counter() - start, shared["cpu_seconds"]
    progress = tqdm(total=len(jobs), desc="sweep", disable=not show_progress)
    if workers > 1 and _can_fork():
        with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("fork")) as pool:
            futures = [pool.submit(_run_job, job) for job in jobs]  # PPO first: longest first
            for _ in as_completed(futures):
                progress.update()
            rows = [f.result() for f in futures]
    else:
        rows = []
        for job in jobs:
            rows.append(_run_job(job))
            progress.update()
    progress.close()
    hacking = [{"seed": r["seed"], "history": r.pop("history"), "samples": r.pop("samples")}
               for r in rows if "history" in r]
    cpu_seconds = [r["cpu_seconds"] for r in rows]
    points = {r.pop("setting"): {k: v for k, v in r.items() if k not in ("method", "cpu_seconds")}
              for r in rows if r["method"] == "point"}
    rows = [r for r in rows if r["method"] != "point"]
    return {
        "sweep": asdict(sweep),
        "reward_model_heldout_accuracy": report.heldout_accuracy,
        "preference_pairs": len(pairs),
        "reward_model_train_accuracy": report.train_accuracy,
        "reward_model_accuracy_on_dpo_pairs": shared["accuracy_on_pairs"],
        # the SFT transformer itself, measured against the bigram: another policy under the curve
        "sft": points["sft_transformer"],
        "kl_free_ppo": hacking,
        "bigram": {"transition": transition.tolist(), "smoothing": sweep.bigram_smoothing,
                   "start": points["start"], "repeat_probability": float(np.diag(transition).mean())},
        "exact_frontier": curve.as_dict(),
        "runs": rows,
        "setup_seconds": setup_seconds,
        "setup_cpu_seconds": setup_cpu,
        "jobs_cpu_seconds": sum(cpu_seconds),
        # What the sweep takes on `workers` free cores: the set-up, then the runs scheduled as they are
        # submitted (each to the first free worker); independent of other load on the machine.
        "free_cores_estimate_seconds": setup_cpu + _schedule(cpu_seconds, workers),
        "workers": workers if _can_fork() else 1,
        "seconds": time.perf_counter() - start,
    }


# ----------------------------------------------------------------------------- reading results

def _smooth(xs: list[float], window: int = 5) -> list[float]:
    return [float(np.mean(xs[max(0, i - window + 1):i + 1])) for i in range(len(xs))]


def hacking_summary(run: dict) -> dict:
    """One KL-free PPO run: peak and end of its (5-iteration smoothed) gold reward and proxy score."""
    gold = _smooth([row["gold_reward"] for row in run["history"]])
    proxy = _smooth([row["reward_model_score"] for row in run["history"]])
    return {"gold_peak": max(gold), "gold_end": gold[-1], "gold_fall": max(gold) - gold[-1],
            "proxy_peak": max(proxy), "proxy_end": proxy[-1], "proxy_fall": max(proxy) - proxy[-1]}


def _spread(values: list[float]) -> dict:
    return {"mean": float(np.mean(values)), "min": float(np.min(values)), "max": float(np.max(values)),
            "range": float(np.ptp(values)), "values": [float(v) for v in values]}


def summarise(results: dict) -> dict:
    """The numbers the notebook discusses and the tests assert on, each with its spread over seeds."""
    per_seed = [hacking_summary(run) for run in results["kl_free_ppo"]]
    hacking = {key: _spread([s[key] for s in per_seed]) for key in per_seed[0]}
    by_setting: dict = {}
    for run in results["runs"]:
        by_setting.setdefault(f"{run['method']}@{run['setting']:g}", []).append(run)
    settings = {key: {k: _spread([r[k] for r in rs]) for k in ("gold_reward", "kl_to_reference", "reward_model_score",
                                                               "gap_below_exact")}
                for key, rs in by_setting.items()}
    return {"kl_free_ppo": hacking, "settings": settings}


def distance_below_frontier(results: dict, method: str | None = None) -> dict[str, float]:
    """For each setting (of ``method``, "ppo" or "dpo", if given): how far below the exact curve its
    runs end, each measured at its own KL (``gap_below_exact``), averaged over seeds.

    The exact curve, not a line through PPO's points: a chord between points of a concave curve lies
    below it, so a method compared with such a chord looks better than it is."""
    out = {}
    for key, value in summarise(results)["settings"].items():
        if method is None or key.startswith(f"{method}@"):
            out[key] = value["gap_below_exact"]["mean"]
    return out


def exact_frontier(results: dict) -> exact_optimum.Frontier:
    return exact_optimum.Frontier.from_dict(results["exact_frontier"])


# ----------------------------------------------------------------------------- plots

def plot_frontier(results: dict, axes=None):
    """Left: gold reward against KL to the bigram reference: the exact optimum (curve over beta),
    PPO (circles by KL coefficient, joined in order), GRPO (plus signs by k3 weight), DPO (triangles by
    beta), every seed.
    Right: how far below the exact curve each run lands."""
    import matplotlib.pyplot as plt
    if axes is None:
        _, axes = plt.subplots(1, 2, figsize=(13, 4.8), constrained_layout=True, width_ratios=(1.6, 1))
    ax = axes[0]
    curve = exact_frontier(results)
    runs = results["runs"]
    kl_max = max([r["kl_to_reference"] for r in runs] + [curve.kl.max(), results["sft"]["kl_to_reference"]]) * 1.05
    ax.plot(curve.kl, curve.reward, color="black", lw=2, label=L("exact optimum of gold - β·KL (β from 1000 to 0.001)"))
    last = curve.kl.max()
    if kl_max > last:  # beyond the greedy limit more KL buys nothing
        ax.plot([last, kl_max], [curve.reward.max()] * 2, color="black", lw=2, ls=":")
    for beta in (1.0, 0.3, 0.1, 0.03):
        i = int(np.argmin(np.abs(np.log(curve.betas / beta))))
        ax.annotate(f"β={beta:g}", (curve.kl[i], curve.reward[i]), textcoords="offset points", xytext=(6, -12),
                    fontsize=7.5, color="0.3")
        ax.plot(curve.kl[i], curve.reward[i], ".", color="black")
    cmap_ppo, cmap_dpo, cmap_grpo = plt.get_cmap("Blues"), plt.get_cmap("Oranges"), plt.get_cmap("Greens")
    kls, betas = results["sweep"]["kl_coefs"], results["sweep"]["dpo_betas"]
    grpo_kls = results["sweep"].get("grpo_kl_coefs", ())
    first_seed = results["sweep"]["seeds"][0]
    for run in runs:
        if run["method"] == "ppo":
            shade = cmap_ppo(0.35 + 0.6 * kls.index(run["setting"]) / max(1, len(kls) - 1))
            ax.scatter(run["kl_to_reference"], run["gold_reward"], marker="o", s=55, color=shade, edgecolor="k", lw=0.5,
                       zorder=3, label=L("PPO, KL coef {setting:g}", setting=run["setting"]) if run["seed"] == first_seed else None)
        elif run["method"] == "grpo_kl_in_reward_unscaled":
            ax.scatter(run["kl_to_reference"], run["gold_reward"], marker="X", s=70, color="tab:olive", edgecolor="k",
                       lw=0.5, zorder=3, label=L("GRPO-R (KL in the reward, unscaled), {setting:g}", setting=run["setting"])
                       if run["seed"] == first_seed else None)
        elif run["method"] == "grpo":
            shade = cmap_grpo(0.35 + 0.6 * grpo_kls.index(run["setting"]) / max(1, len(grpo_kls) - 1))
            ax.scatter(run["kl_to_reference"], run["gold_reward"], marker="P", s=80, color=shade, edgecolor="k", lw=0.5,
                       zorder=3, label=L("GRPO, k3 weight {setting:g}", setting=run["setting"]) if run["seed"] == first_seed else None)
        else:
            shade = cmap_dpo(0.35 + 0.6 * betas.index(run["setting"]) / max(1, len(betas) - 1))
            ax.scatter(run["kl_to_reference"], run["gold_reward"], marker="^", s=70, color=shade, edgecolor="k", lw=0.5,
                       zorder=3, label=L("DPO, beta {setting:g}", setting=run["setting"]) if run["seed"] == first_seed else None)
    settings = summarise(results)["settings"]
    path = [settings[f"ppo@{c:g}"] for c in kls]
    ax.plot([p["kl_to_reference"]["mean"] for p in path], [p["gold_reward"]["mean"] for p in path], "-",
            color="tab:blue", alpha=0.5, lw=1, label=L("PPO as its KL coefficient falls (seed means)"))
    start = results["bigram"]["start"]
    ax.scatter([start["kl_to_reference"]], [start["gold_reward"]], marker="s", color="gray", zorder=3,
               label=L("bigram reference (start)"))
    sft = results["sft"]
    ax.scatter([sft["kl_to_reference"]], [sft["gold_reward"]], marker="D", color="white", edgecolor="gray", zorder=3,
               label=L("SFT transformer (not trained here)"))
    ax.set(title=L("Gold reward against KL to the bigram reference"), xlabel=L("KL(pi || pi_ref) per response (nats)"),
           ylabel=L("gold reward of fresh samples"), xlim=(-0.5, kl_max))
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="lower right", ncol=2)
    # Right panel: distance below the curve, per setting, every seed.
    ax = axes[1]
    keys = list(settings)
    for i, key in enumerate(keys):
        values = settings[key]["gap_below_exact"]["values"]
        method = key.split("@")[0]
        color, marker = {"ppo": ("tab:blue", "o"), "grpo": ("tab:green", "P"),
                         "grpo_kl_in_reward_unscaled": ("tab:olive", "X")}.get(method, ("tab:orange", "^"))
        ax.scatter([i] * len(values), values, color=color, edgecolor="k", lw=0.5, marker=marker, zorder=3)
        ax.plot([i - 0.25, i + 0.25], [settings[key]["gap_below_exact"]["mean"]] * 2, color=color)
    ax.axhline(0, color="black", lw=1)
    ax.set_xticks(range(len(keys)), [k.replace("grpo_kl_in_reward_unscaled@", "GRPO-R ").replace(
        "grpo@", "GRPO ").replace("ppo@", "PPO ").replace("dpo@", "DPO ") for k in keys],
                  rotation=45, fontsize=8)
    ax.set(title=L("Below the exact curve at the run's own KL"), ylabel=L("exact best gold - run's gold"))
    ax.grid(alpha=0.3, axis="y")
    return axes


def plot_overoptimisation(results: dict, axes=None):
    """KL-free PPO, every seed: reward-model score (proxy) and gold reward over
    training, and gold gain against d = sqrt(KL) with Gao et al.'s fit (all seeds pooled)."""
    import matplotlib.pyplot as plt
    if axes is None:
        _, axes = plt.subplots(1, 2, figsize=(13, 4.4), constrained_layout=True)
    runs = results["kl_free_ppo"]
    ax, twin = axes[0], axes[0].twinx()
    steps = [row["iteration"] for row in runs[0]["history"]]
    for target, key, color, name in ((ax, "reward_model_score", "tab:blue", L("proxy")),
                                     (twin, "gold_reward", "tab:orange", L("gold"))):
        curves = np.array([_smooth([row[key] for row in run["history"]]) for run in runs])
        target.fill_between(steps, curves.min(0), curves.max(0), color=color, alpha=0.2, lw=0,
                            label=L("{name}: range over seeds", name=name))
        for run, curve in zip(runs, curves):
            target.plot(steps, curve, color=color, lw=0.7, alpha=0.6)
        target.plot(steps, curves.mean(0), color=color, lw=2.2, label=L("{name}: mean of {count} seeds", name=name,
                                                                        count=len(runs)))
    falls = sorted(hacking_summary(run)["gold_fall"] for run in runs)
    ax.set(title=L("KL-free PPO, {count} seeds: the proxy holds,\nthe gold reward falls ({falls} below its peak)",
                   count=len(runs), falls=" / ".join(f"{f:.2f}" for f in falls)),
           xlabel=L("PPO iteration"), ylabel=L("reward-model score (SFT std units)"))
    twin.set(ylabel=L("gold reward"))
    handles = [h for a in (ax, twin) for h in a.get_legend_handles_labels()[0]]
    labels = [lab for a in (ax, twin) for lab in a.get_legend_handles_labels()[1]]
    ax.legend(handles, labels, loc="lower right", fontsize=7.5)
    ax.grid(alpha=0.3)
    kl_all, gold_all = [], []
    for i, run in enumerate(runs):
        kl = np.array([row["kl_to_reference"] for row in run["history"]])
        gold = np.array([row["gold_reward"] for row in run["history"]])
        gold = gold - gold[0]
        kl_all.append(kl), gold_all.append(gold)
        axes[1].scatter(np.sqrt(np.maximum(kl, 0)), gold, s=10, alpha=0.7, marker="os^D"[i % 4],
                        label=L("seed {seed}", seed=run["seed"]))
    kl, gold = np.concatenate(kl_all), np.concatenate(gold_all)
    alpha, beta = fit_gao(kl, gold)
    grid = np.linspace(1e-3, np.sqrt(kl.max()), 100)
    axes[1].plot(grid, grid * (alpha - beta * np.log(grid)), color="black",
                 label=L("fit d(alpha - beta log d), alpha={alpha:.2f}, beta={beta:.2f}", alpha=alpha, beta=beta))
    axes[1].set(title=L("Over-optimisation (Gao et al. 2022 form), all seeds"), xlabel=L("d = sqrt(KL to reference)"),
                ylabel=L("gold reward gain over the reference"))
    axes[1].grid(alpha=0.3)
    axes[1].legend(fontsize=8)
    return axes


def format_samples(results: dict, seed: int | None = None) -> str:
    run = next(r for r in results["kl_free_ppo"] if seed is None or r["seed"] == seed)
    lines = []
    for when, heading in (("before", "KL-free PPO (seed {seed}), before:"), ("after", "KL-free PPO (seed {seed}), after:")):
        lines.append(t(heading, seed=run["seed"]))
        for sample in run["samples"][when]:
            lines.append(f"  [{sample['prompt']}] {sample['response']}   "
                         + t("(RM {rm:+.2f}, gold {gold:+.2f})", rm=sample["reward_model_score"], gold=sample["gold_reward"]))
    return "\n".join(lines)


def report(results: dict) -> str:
    """The sweep's conclusions as text: what the notebook and the command print."""
    summary = summarise(results)
    h = summary["kl_free_ppo"]
    lines = [t("KL-free PPO, seeds {seeds}: gold peak {peak:.2f} (seeds {peak_min:.2f}-{peak_max:.2f}), end {end:.2f} "
               "({end_min:.2f}-{end_max:.2f}); proxy end {proxy_end:.2f}, {proxy_fall:.2f} at most below its peak",
               seeds=[r["seed"] for r in results["kl_free_ppo"]], peak=h["gold_peak"]["mean"],
               peak_min=h["gold_peak"]["min"], peak_max=h["gold_peak"]["max"], end=h["gold_end"]["mean"],
               end_min=h["gold_end"]["min"], end_max=h["gold_end"]["max"], proxy_end=h["proxy_end"]["mean"],
               proxy_fall=h["proxy_fall"]["max"]),
             t("bigram reference: exact best gold {best:.2f}, start gold {start:+.3f}; the SFT transformer: gold "
               "{sft:+.3f} at KL {sft_kl:.2f} to the bigram, {sft_gap:+.3f} below the curve",
               best=max(results["exact_frontier"]["gold_reward"]), start=results["bigram"]["start"]["gold_reward"],
               sft=results["sft"]["gold_reward"], sft_kl=results["sft"]["kl_to_reference"],
               sft_gap=results["sft"]["gap_below_exact"]),
             t("preference pairs (the reward model's training pairs, also DPO's): {count}",
               count=results["preference_pairs"]),
             # the table's header, each column padded as a terminal draws it (a Chinese character takes two)
             "".join(padded(t(name), width) for name, width in (("setting", 12), ("gold (seeds)", 26),
                                                                  ("KL (seeds)", 23), ("below the exact curve (seeds)", 0)))]
    for key, s in summary["settings"].items():
        g, k, d = s["gold_reward"], s["kl_to_reference"], s["gap_below_exact"]
        lines.append(f"  {key:<9} {g['mean']:+.3f} ({g['min']:+.3f}..{g['max']:+.3f})  "
                     f"{k['mean']:6.2f} ({k['min']:5.2f}..{k['max']:5.2f})  "
                     f"{d['mean']:+.3f} ({d['min']:+.3f}..{d['max']:+.3f})")
    gaps = distance_below_frontier(results)
    lines.append(t("below the exact curve at their own KL (seed means): ")
                 + t(", ").join(f"{k} {v:+.3f}" for k, v in gaps.items()))
    return "\n".join(lines)


# ----------------------------------------------------------------------------- CLI

def load_or_run(path: Path = DEFAULT_OUT, functions: dict | None = None) -> dict:
    """The cached results if present, else run the sweep (minutes: bench/frontier.py) and cache it."""
    if path.is_file():
        return json.loads(path.read_text())
    if functions is None:
        raise FileNotFoundError(f"{path} is missing: run `python -m rlhf_course.lab.frontier` first")
    results = run_sweep(**functions)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(results, indent=1))
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--notebook", type=Path, default=COURSE_ROOT / "source" / ASSIGNMENT / NOTEBOOK,
                        help="a completed notebook whose functions drive the sweep (default: the reference)")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument("--grpo-notebook", type=Path, default=COURSE_ROOT / "source" / "grpo" / "grpo.ipynb",
                        help="a completed GRPO notebook; its kl_estimator_k3 comes from the KL notebook beside its folder")
    parser.add_argument("--no-grpo", action="store_true", help="PPO and DPO only")
    parser.add_argument("--grpo-kl-coefs", type=float, nargs="+", help="GRPO's k3 weights (default: 0.05 0.2 1)")
    parser.add_argument("--seeds", type=int, nargs="+", help="seeds of every setting (default: 1 2)")
    parser.add_argument("--workers", type=int, default=SweepConfig.workers)
    args = parser.parse_args(argv)
    from rlhf_course.lab.student import StudentFunctionError
    sweep = SweepConfig(workers=args.workers)
    if args.seeds:
        sweep = replace(sweep, seeds=tuple(args.seeds), hacking_seeds=tuple(args.seeds))
    if args.grpo_kl_coefs:
        sweep = replace(sweep, grpo_kl_coefs=tuple(args.grpo_kl_coefs))
    try:
        functions = functions_from_notebook(args.notebook, STUDENT_FUNCTIONS)
        if not args.no_grpo:
            functions.update(functions_from_notebook(args.grpo_notebook, ("group_relative_advantages",)))
            functions["kl_estimator_k3"] = grpo.find_other_functions(args.grpo_notebook.resolve().parent)["kl_estimator_k3"]
        results = run_sweep(**functions, sweep=sweep)
    except (StudentFunctionError, LookupError) as exc:
        print(f"sweep stopped: {exc}", file=sys.stderr)
        return 2
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=1))
    print(f"{len(results['runs'])} runs in {results['seconds']:.1f} s ({results['workers']} processes; "
          f"CPU: set-up {results['setup_cpu_seconds']:.1f} s, runs {results['jobs_cpu_seconds']:.1f} s; "
          f"on {results['workers']} free cores about {results['free_cores_estimate_seconds']:.0f} s) -> {args.out}")
    print(report(results))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
