"""The reward-hacking / frontier study: what it concludes, in the cached results and in a fresh run.

The conclusions need the whole study (about 100 CPU-seconds): they are asserted here on the cached results,
and on a whole fresh sweep by ``python bench/frontier.py --check``, which runs the sweep and then this file's
tests on it (``RLHF_FRONTIER_RESULTS`` names its results: the ``fresh`` parameters and the test of agreement
with the cache).  The suite itself runs the command end to end on a tiny sweep (one seed, every method at one
or two coefficients, a few iterations, the study's own set-up) and asserts what holds at any size.

A fresh run is not bit-identical to the cache on another CPU (BLAS kernels, thread counts), so
"regenerated" is tested as: the same conclusions, and every setting's numbers within the
seed-to-seed spread measured with five seeds.
"""
import dataclasses
import json
import os
from pathlib import Path

import numpy as np
import pytest
import torch
from tests.support.lab_stages import trained_once

from rlhf_course.lab import frontier, train
from rlhf_course.lab import exact_optimum

# Seed-to-seed spread measured with five seeds (`python -m rlhf_course.lab.frontier --seeds 1 2 3 4 5`):
# the standard deviation over seeds of one run's final gold reward, and of log KL, per setting.  Two
# sweeps' two-seed means differ by about one such deviation (sqrt(1/2 + 1/2)); the tolerances allow
# four, and never less than FLOOR (a setting whose seeds happened to agree closely).
# GRPO's settings were measured the same way (five seeds, the sweep's set-up): gold 0.016, 0.034, 0.018 and 0.005
# for the variant; log KL 0.074, 0.128, 0.200 and 0.013.
GOLD_SD = {"ppo@0": 0.141, "ppo@0.003": 0.005, "ppo@0.01": 0.003, "ppo@0.05": 0.016, "ppo@0.2": 0.025,
           "grpo@0.05": 0.016, "grpo@0.2": 0.034, "grpo@1": 0.018, "grpo_kl_in_reward_unscaled@0.05": 0.005,
           "dpo@0.1": 0.083, "dpo@0.5": 0.002, "dpo@2": 0.011}
LOG_KL_SD = {"ppo@0": 0.040, "ppo@0.003": 0.022, "ppo@0.01": 0.041, "ppo@0.05": 0.049, "ppo@0.2": 0.059,
             "grpo@0.05": 0.074, "grpo@0.2": 0.128, "grpo@1": 0.200, "grpo_kl_in_reward_unscaled@0.05": 0.013,
             "dpo@0.1": 0.040, "dpo@0.5": 0.009, "dpo@2": 0.035}
FLOOR = {"gold": 0.01, "log_kl": 0.03}
# KL-free PPO: where the smoothed gold reward ends, sd over five seeds (ends at 0.51, 0.54, 0.86, 0.51, 0.86).
KL_FREE_GOLD_END_SD = 0.187


@pytest.fixture(scope="session")
def cached(repo):
    return json.loads((repo / "notebooks" / "frontier_results.json").read_text())


# A whole fresh sweep's results, made and named by `python bench/frontier.py --check`.
FRESH = os.environ.get("RLHF_FRONTIER_RESULTS")


@pytest.fixture(scope="session")
def fresh():
    return json.loads(Path(FRESH).read_text())


@dataclasses.dataclass(frozen=True)
class TinySweep(frontier.SweepConfig):
    """The study at a test-time size: KL-free PPO and the largest coefficient, DPO at one beta, GRPO and its
    variant at one weight, a few iterations; the set-up (SFT, reward model, bigram, exact curve, evaluation
    batch) is the study's; its SFT policy and reward model are the lab's quick ones, test_ppo_dpo.py's and
    test_grpo.py's (the sweep's largest cost: bench/RESULTS.md)."""
    kl_coefs: tuple[float, ...] = (0.0, 0.2)
    dpo_betas: tuple[float, ...] = (0.1,)
    ppo_iterations: int = 3
    dpo_steps: int = 5


def no_training(*args, **kwargs):
    raise AssertionError("trained, not loaded from the cache")


@pytest.fixture(scope="session")
def tiny(tmp_path_factory, lab_stage_cache):
    """`python -m rlhf_course.frontier --seeds 1 --grpo-kl-coefs 0.2` end to end (the reference notebooks'
    functions, the forked workers, the results file and the printed report) with the sweep's defaults
    made tiny.  Its SFT policy and reward model come from RLHF_LAB_CACHE, as on the hub: trained (one thread, the
    sweep's) by whichever of this file, test_ppo_dpo.py and test_grpo.py needs them first, loaded by the others;
    the sweep itself trains neither."""
    out = tmp_path_factory.mktemp("frontier") / "results.json"
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # the sweep's set-up runs on one thread, which names its cached models
    try:
        trained_once(lab_stage_cache, train.LabConfig.setting("quick"))
    finally:
        torch.set_num_threads(threads)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(frontier, "SweepConfig", TinySweep)
        patch.setenv("RLHF_LAB_CACHE", str(lab_stage_cache))
        patch.setattr(train, "train_sft", no_training)
        patch.setattr(train, "train_reward_model", no_training)
        assert frontier.main(["--out", str(out), "--seeds", "1", "--grpo-kl-coefs", "0.2"]) == 0
    return json.loads(out.read_text())


# The conclusions: the whole study's (the cache's, and a fresh one's under bench/frontier.py --check).
@pytest.fixture(params=["cached", *(["fresh"] if FRESH else [])])
def results(request):
    return request.getfixturevalue(request.param)


# What holds at any size: the tiny sweep's too.
@pytest.fixture(params=["cached", pytest.param("tiny", marks=pytest.mark.slow), *(["fresh"] if FRESH else [])])
def any_results(request):
    return request.getfixturevalue(request.param)


# ----------------------------------------------------------------------------- the conclusions

def test_kl_free_ppo_hacks_the_reward_model(results):
    """Every seed: the proxy stays at its peak while the gold reward ends below its own peak, and the
    policy repeats words.  How far the gold falls is a property of the seed (and the CPU), bimodal: 0.46, 0.42,
    0.08, 0.45, 0.09 for seeds 1-5 on one CPU, 0.37, 0.06, 0.06 for seeds 1-3 in the cache, made on another.
    So every seed must fall by more than 0.04; the mean fall is not asked of a fresh run, whose three seeds may
    all land in the low mode."""
    def repeats(samples) -> int:
        words = " ".join(sample["response"] for sample in samples).split()
        return sum(a == b for a, b in zip(words, words[1:]))

    after = []
    for run in results["kl_free_ppo"]:
        s = frontier.hacking_summary(run)
        assert s["proxy_fall"] < 0.03, (run["seed"], s)
        assert s["gold_fall"] > 0.04, (run["seed"], s)
        # the hack: adjacent repeats in the four samples shown, where the start had about none. Counted on
        # four responses, per seed: 10, 22, 5 in the cached sweep, 3 for a seed of a fresh one on another CPU.
        assert repeats(run["samples"]["after"]) >= repeats(run["samples"]["before"]) + 2, run["samples"]["after"]
        after.append(repeats(run["samples"]["after"]))
    assert sum(after) >= 4 * len(after), after


def test_larger_kl_coefficients_give_lower_kl(results):
    """PPO's, GRPO's and DPO's KL fall as the coefficient grows, by more than the seeds disagree."""
    settings = frontier.summarise(results)["settings"]
    for method, values in (("ppo", results["sweep"]["kl_coefs"]), ("grpo", results["sweep"]["grpo_kl_coefs"]),
                           ("dpo", results["sweep"]["dpo_betas"])):  # (a fresh sweep runs GRPO at one weight)
        kls = [settings[f"{method}@{v:g}"]["kl_to_reference"] for v in values]
        for looser, tighter in zip(kls, kls[1:]):
            assert looser["min"] > tighter["max"], (method, looser, tighter)


def test_every_run_lies_at_or_below_the_exact_curve(any_results):
    """Nothing beats the exact optimum: each run's distance below the curve is >= 0 up to its
    setting's seed spread (the points are estimates from finite samples).  Measured over five seeds:
    every run strictly below, by 0.005 to 0.42."""
    results = any_results
    settings = frontier.summarise(results)["settings"]
    for key, s in settings.items():
        gap = s["gap_below_exact"]
        assert gap["min"] >= -max(gap["range"], 2 * FLOOR["gold"]), (key, gap)
    assert results["bigram"]["start"]["gap_below_exact"] >= -2 * FLOOR["gold"]
    assert results["sft"]["gap_below_exact"] >= -2 * FLOOR["gold"]


def test_ppo_and_dpo_land_close_to_the_curve(results):
    """With a KL penalty both methods end close to the optimum (five seeds: 0.005 to 0.05 below it, but
    one DPO beta=0.1 seed in five at 0.19); KL-free PPO ends below it by 0.11 to 0.42, the seed
    that fell least included."""
    settings = frontier.summarise(results)["settings"]
    for key, s in settings.items():
        if key == "ppo@0":
            assert s["gap_below_exact"]["min"] > 0.05, s["gap_below_exact"]  # over-optimised
        else:
            assert s["gap_below_exact"]["mean"] < 0.15, (key, s["gap_below_exact"])


def test_grpo_lands_further_below_the_curve_than_its_variant_with_ppos_objective(results):
    """GRPO with k3 in the loss and std-scaled advantages ends further below the exact curve at KL 4-18
    (five seeds: 0.059 to 0.118) than the same trainer with the KL in the reward and no std scaling,
    PPO's objective (0.016 to 0.025, at KL 7.5-7.7, where PPO ends 0.026-0.031 below); the margin asked
    is 0.02, below the smallest five-seed difference (0.034). At the largest k3 weight GRPO barely moves
    (KL under 1) and lies close to the curve."""
    settings = frontier.summarise(results)["settings"]
    variant = settings["grpo_kl_in_reward_unscaled@0.05"]["gap_below_exact"]
    assert variant["mean"] < 0.05, variant
    for coef in sorted({0.05, 0.2} & set(results["sweep"]["grpo_kl_coefs"])):
        gap = settings[f"grpo@{coef:g}"]["gap_below_exact"]
        assert gap["mean"] > variant["mean"] + 0.02, (coef, gap, variant)
    if 1.0 in results["sweep"]["grpo_kl_coefs"]:
        assert settings["grpo@1"]["kl_to_reference"]["max"] < 1.0


def test_distance_below_frontier_is_the_gap_to_the_exact_curve(any_results):
    """Every setting's distance is its runs' mean gap below the exact curve, each at the run's own KL
    (recomputed here from the curve, not read from the stored gaps), for PPO and DPO alike; every DPO
    setting ends within 0.1 gold (of a range of about 1) below the curve, and not above it beyond
    the sampling noise the start point shows."""
    results = any_results
    curve = frontier.exact_frontier(results)
    gaps = frontier.distance_below_frontier(results)
    assert set(gaps) == set(frontier.summarise(results)["settings"])
    for key, gap in gaps.items():
        method, setting = key.split("@")
        runs = [r for r in results["runs"] if r["method"] == method and f"{r['setting']:g}" == setting]
        expected = np.mean([curve.best_reward_at(r["kl_to_reference"])[0] - r["gold_reward"] for r in runs])
        assert gap == pytest.approx(expected, abs=1e-9), key
    dpo = frontier.distance_below_frontier(results, "dpo")
    assert len(dpo) == len(results["sweep"]["dpo_betas"]) and dpo.keys() <= gaps.keys()
    assert all(-2 * FLOOR["gold"] <= gap < 0.1 for gap in dpo.values()), dpo


def test_dpo_trains_on_the_reward_models_pairs(any_results):
    """Like for like: DPO's pairs are the reward model's training pairs (it orders them exactly as it did)."""
    results = any_results
    assert results["reward_model_accuracy_on_dpo_pairs"] == results["reward_model_train_accuracy"]
    assert results["preference_pairs"] == 2000


# ----------------------------------------------------------------------------- regenerating

@pytest.mark.slow
@pytest.mark.skipif(not FRESH, reason="judges a whole fresh sweep: python bench/frontier.py --check")
def test_a_fresh_run_agrees_with_the_cache_within_the_seed_spread(fresh, cached):
    """Same runs; every setting's mean gold reward and mean log KL within four seed standard deviations
    of the cache's; KL-free PPO's mean end point likewise; the exact curve (from a refitted bigram) to 0.02.
    Bit-exact agreement does not hold across CPUs, so it is not asked for."""
    ours, theirs = frontier.summarise(fresh)["settings"], frontier.summarise(cached)["settings"]
    assert theirs.keys() == GOLD_SD.keys() and ours.keys() <= theirs.keys()
    assert {key for key in theirs if not key.startswith("grpo@")} <= ours.keys()
    for key in ours:
        a, b = ours[key], theirs[key]
        gold_tol = 4 * max(GOLD_SD[key], FLOOR["gold"])
        kl_tol = 4 * max(LOG_KL_SD[key], FLOOR["log_kl"])
        assert abs(a["gold_reward"]["mean"] - b["gold_reward"]["mean"]) <= gold_tol, (key, a["gold_reward"], b["gold_reward"])
        assert abs(np.log(a["kl_to_reference"]["mean"] / b["kl_to_reference"]["mean"])) <= kl_tol, key
    end = [frontier.summarise(r)["kl_free_ppo"]["gold_end"]["mean"] for r in (fresh, cached)]
    assert abs(end[0] - end[1]) <= 4 * KL_FREE_GOLD_END_SD * np.sqrt(2 / len(cached["kl_free_ppo"])), end
    np.testing.assert_allclose(fresh["exact_frontier"]["gold_reward"], cached["exact_frontier"]["gold_reward"], atol=0.02)
    np.testing.assert_allclose(fresh["exact_frontier"]["kl_to_reference"], cached["exact_frontier"]["kl_to_reference"],
                               rtol=0.05, atol=0.05)


@pytest.mark.slow
def test_the_tiny_sweep_runs_every_job_and_writes_what_the_notebook_reads(tiny, cached):
    """Every (method, setting, seed) of the sweep ran once, in the forked workers; the results have the
    cache's layout (what the notebook, the plots and the report read); KL-free PPO kept its history and
    its samples before and after."""
    sweep = tiny["sweep"]
    assert sweep["seeds"] == sweep["hacking_seeds"] == [1] and sweep["grpo_kl_coefs"] == [0.2]
    assert sweep["ppo_iterations"] == TinySweep.ppo_iterations and tiny["workers"] == 2
    expected = ({("ppo", kl, 1) for kl in sweep["kl_coefs"]} | {("grpo", 0.2, 1)}
                | {("grpo_kl_in_reward_unscaled", kl, 1) for kl in sweep["grpo_variant_kl_coefs"]}
                | {("dpo", beta, 1) for beta in sweep["dpo_betas"]})
    ran = [(r["method"], r["setting"], r["seed"]) for r in tiny["runs"]]
    assert sorted(ran) == sorted(expected)
    assert tiny.keys() == cached.keys() and tiny["bigram"].keys() == cached["bigram"].keys()
    assert all(run.keys() == cached["runs"][0].keys() for run in tiny["runs"])
    assert tiny["sft"].keys() == cached["sft"].keys() == tiny["bigram"]["start"].keys()
    assert [run["seed"] for run in tiny["kl_free_ppo"]] == [1]
    [hacking] = tiny["kl_free_ppo"]
    assert [row["iteration"] for row in hacking["history"]] == list(range(sweep["ppo_iterations"]))
    assert hacking["history"][0].keys() == cached["kl_free_ppo"][0]["history"][0].keys()
    assert len(hacking["samples"]["before"]) == len(hacking["samples"]["after"]) > 0
    assert frontier.summarise(tiny)["settings"].keys() == {f"{m}@{s:g}" for m, s, _ in expected}
    assert "below the exact curve" in frontier.report(tiny)


@pytest.mark.slow
def test_the_tiny_sweeps_set_up_is_the_studys(tiny, cached):
    """The set-up does not depend on the sweep's size: the exact curve (from a refitted bigram) agrees with
    the cache's as a whole fresh sweep must (to 0.02 gold), and the reference policy starts on it."""
    np.testing.assert_allclose(tiny["exact_frontier"]["gold_reward"], cached["exact_frontier"]["gold_reward"],
                               atol=0.02)
    np.testing.assert_allclose(tiny["exact_frontier"]["kl_to_reference"], cached["exact_frontier"]["kl_to_reference"],
                               rtol=0.05, atol=0.05)
    assert tiny["bigram"]["start"]["kl_to_reference"] == pytest.approx(0.0, abs=1e-6)
    assert abs(tiny["bigram"]["start"]["gap_below_exact"]) <= 2 * FLOOR["gold"]
    assert tiny["preference_pairs"] == cached["preference_pairs"]


def test_the_cached_curve_is_the_exact_optimum_of_the_cached_bigram(cached):
    reference = exact_optimum.toy_reference(np.array(cached["bigram"]["transition"]))
    betas = np.array(cached["exact_frontier"]["beta"])[::25]
    curve = exact_optimum.frontier(reference, exact_optimum.gold_step_rewards(), betas)
    np.testing.assert_allclose(curve.reward, cached["exact_frontier"]["gold_reward"][::25], atol=1e-9)
    np.testing.assert_allclose(curve.kl, cached["exact_frontier"]["kl_to_reference"][::25], atol=1e-9)


def test_gao_fit_recovers_known_coefficients():
    kl = np.linspace(0.1, 40, 60)
    d = np.sqrt(kl)
    gold = d * (0.6 - 0.25 * np.log(d))
    alpha, beta = frontier.fit_gao(kl, gold)
    assert alpha == pytest.approx(0.6, abs=1e-6) and beta == pytest.approx(0.25, abs=1e-6)


# ----------------------------------------------------------------------------- figures
# (the companion notebook and its Chinese edition run in tests/test_notebooks_execute.py)

def test_figures_render(cached, tmp_path):
    import matplotlib.pyplot as plt
    frontier.plot_frontier(cached)
    plt.savefig(tmp_path / "frontier.png")
    frontier.plot_overoptimisation(cached)
    plt.savefig(tmp_path / "overoptimisation.png")
    plt.close("all")
    assert (tmp_path / "frontier.png").stat().st_size > 20_000
    assert (tmp_path / "overoptimisation.png").stat().st_size > 20_000


# ----------------------------------------------------------------------------- what the prose says of the cache

def dpo_lead_over_ppo(results: dict) -> dict[str, float]:
    """For each DPO setting: how much closer to the exact curve it ends than the PPO setting with a KL penalty whose
    mean KL is nearest its own (seed means of the gap below the curve)."""
    settings = frontier.summarise(results)["settings"]
    ppo = {key: s for key, s in settings.items() if key.startswith("ppo@") and key != "ppo@0"}
    lead = {}
    for key, s in settings.items():
        if key.startswith("dpo@"):
            kl = s["kl_to_reference"]["mean"]
            nearest = min(ppo.values(), key=lambda p: abs(p["kl_to_reference"]["mean"] - kl))
            lead[key] = nearest["gap_below_exact"]["mean"] - s["gap_below_exact"]["mean"]
    return lead


def test_the_docs_and_the_companion_quote_the_cache(repo, cached):
    """docs/lab-and-frontier.md's DPO lead over PPO, and the companion's (both editions) DPO KLs and timings."""
    lead = dpo_lead_over_ppo(cached)
    assert [round(v, 3) for v in sorted(lead.values())] == [0.005, 0.014, 0.021]
    docs = (repo / "docs" / "lab-and-frontier.md").read_text()
    assert f"(by {min(lead.values()):.3f}-{max(lead.values()):.3f}, seed means;" in " ".join(docs.split())
    dpo_gaps = [s["gap_below_exact"]["mean"] for key, s in frontier.summarise(cached)["settings"].items()
                if key.startswith("dpo@")]
    assert f"DPO {min(dpo_gaps):.3f}-{max(dpo_gaps):.3f} below" in " ".join(docs.split())

    settings = frontier.summarise(cached)["settings"]
    kls = [settings[f"dpo@{beta:g}"]["kl_to_reference"]["mean"] for beta in cached["sweep"]["dpo_betas"]]
    assert kls == sorted(kls, reverse=True)  # after the sweep's training a larger beta ends closer
    first_cell = json.loads((repo / "notebooks" / "reward_hacking_frontier.ipynb").read_text())["cells"][0]["source"]
    english = " ".join("".join(first_cell).split())
    chinese = json.loads((repo / "i18n" / "reward_hacking_frontier.zh-CN.json").read_text())["cells"]["688f7464"]["text"]
    assert "KL {:.1f}, {:.1f} and {:.1f} nats".format(*kls) in english
    assert "KL 分别为 {:.1f}、{:.1f}、{:.1f} nats".format(*kls) in chinese
    took, free = round(cached["seconds"]), round(cached["free_cores_estimate_seconds"])
    assert (took, free) == (92, 54)
    assert f"took {took} s on a busy machine and records {free} s as its own free-core estimate" in english
    assert f"用了 {took} 秒，它自己估计的空闲核心用时为 {free} 秒" in chinese
