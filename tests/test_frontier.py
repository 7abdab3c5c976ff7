"""The sweep of issue 'reward hacking and the frontier': regenerated exactly, effects with margins,
and the companion notebook runs top to bottom."""
import json
import math

import nbformat
import numpy as np
import pytest
from nbclient import NotebookClient

from rlhf_course import frontier


@pytest.fixture(scope="module")
def cached(repo):
    return json.loads((repo / "notebooks" / "frontier_results.json").read_text())


def _numbers(results):
    """Everything numeric except timing, flattened to a sorted list of (path, value)."""
    out = []
    def walk(node, path):
        if isinstance(node, dict):
            for key, value in node.items():
                if key != "seconds":
                    walk(value, f"{path}/{key}")
        elif isinstance(node, list):
            for i, value in enumerate(node):
                walk(value, f"{path}[{i}]")
        elif isinstance(node, (int, float)) and not isinstance(node, bool):
            out.append((path, float(node)))
    walk(results, "")
    return out


@pytest.mark.slow
def test_the_command_regenerates_the_cached_results(repo, tmp_path, cached):
    out = tmp_path / "results.json"
    assert frontier.main(["--out", str(out)]) == 0
    fresh = json.loads(out.read_text())
    ours, theirs = _numbers(fresh), _numbers(cached)
    assert [p for p, _ in ours] == [p for p, _ in theirs]
    for (path, a), (_, b) in zip(ours, theirs):
        assert math.isclose(a, b, rel_tol=1e-6, abs_tol=1e-6), path


def test_kl_free_ppo_hacks_the_reward_model(cached):
    summary = frontier.summarise(cached)
    assert summary["kl_free_gold_end"] < summary["kl_free_gold_peak"] - 0.2      # gold peaks, then falls
    assert summary["kl_free_proxy_end"] > summary["kl_free_proxy_peak"] - 0.05   # the proxy does not
    after = " ".join(sample["response"] for sample in cached["kl_free_ppo"]["samples"]["after"])
    words = after.split()
    assert sum(a == b for a, b in zip(words, words[1:])) >= 10  # read the hack: repeated words


def test_larger_kl_coefficients_give_lower_kl(cached):
    means = frontier.summarise(cached)["means"]
    kls = [means[f"ppo@{c:g}"]["kl_to_reference"] for c in cached["sweep"]["kl_coefs"]]
    assert kls == sorted(kls, reverse=True)
    betas = [means[f"dpo@{b:g}"]["kl_to_reference"] for b in cached["sweep"]["dpo_betas"]]
    assert betas == sorted(betas, reverse=True)


def test_dpo_lies_near_the_ppo_frontier(cached):
    """Stated tolerance: every DPO setting within 0.1 gold (of a range of about 1) of the PPO frontier."""
    gaps = frontier.distance_below_frontier(cached)
    assert len(gaps) == 3
    assert all(abs(gap) < 0.1 for gap in gaps.values()), gaps


def test_gao_fit_recovers_known_coefficients():
    kl = np.linspace(0.1, 40, 60)
    d = np.sqrt(kl)
    gold = d * (0.6 - 0.25 * np.log(d))
    alpha, beta = frontier.fit_gao(kl, gold)
    assert alpha == pytest.approx(0.6, abs=1e-6) and beta == pytest.approx(0.25, abs=1e-6)


@pytest.mark.slow
def test_companion_notebook_runs_and_plots(repo):
    path = repo / "notebooks" / "reward_hacking_frontier.ipynb"
    nb = nbformat.read(str(path), as_version=4)
    NotebookClient(nb, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(path.parent)}}).execute()
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs]
    assert not [o for o in outputs if o.output_type == "error"]
    assert sum("image/png" in o.get("data", {}) for o in outputs) == 2
    text = "".join(o.get("text", "") for o in outputs)
    assert "below the PPO frontier" in text and "KL-free PPO, after" in text


def test_figures_render(cached, tmp_path):
    import matplotlib.pyplot as plt
    frontier.plot_frontier(cached)
    plt.savefig(tmp_path / "frontier.png")
    frontier.plot_overoptimisation(cached)
    plt.savefig(tmp_path / "overoptimisation.png")
    plt.close("all")
    assert (tmp_path / "frontier.png").stat().st_size > 20_000
