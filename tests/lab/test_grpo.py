"""GRPO on the tiny LM, trained by the three functions it is given: the reward-model score and the gold
reward rise, the KL to the reference grows, the entropy falls; a broken function stops it with one
sentence naming the function.  The reference functions are written here, in the tests: the package
holds none."""
from pathlib import Path

import pytest
import torch

from rlhf_course.lab import train
from rlhf_course.lab.grpo import GrpoConfig, GrpoFunctions, grpo_train
from rlhf_course.lab.plots import plot_ppo_history
from rlhf_course.lab.student import StudentFunctionError
from tests.support.lab_stages import trained_once


def group_relative_advantages(rewards, scale_by_std=True, eps=1e-4):
    if rewards.shape[1] < 2:
        return torch.zeros_like(rewards)
    centred = rewards - rewards.mean(1, keepdim=True)
    return centred / (rewards.std(1, keepdim=True) + eps) if scale_by_std else centred


def ppo_clipped_objective(ratio, advantage, clip_epsilon):
    return torch.min(ratio * advantage, ratio.clamp(1 - clip_epsilon, 1 + clip_epsilon) * advantage).mean()


def kl_estimator_k3(log_p, ref_log_p):
    d = ref_log_p - log_p
    return torch.expm1(d) - d


ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts" / "lab"
REFERENCE = GrpoFunctions.wrap(group_relative_advantages, ppo_clipped_objective, kl_estimator_k3)


@pytest.fixture(scope="module")
def sft_and_reward_model(lab_stage_cache):
    # the quick setting's SFT and reward model (the effects below measured on them), seed 0: test_ppo_dpo.py's and
    # test_frontier.py's sweep's, trained by whichever of the three files needs them first
    config = train.LabConfig.setting("quick")
    stages = trained_once(lab_stage_cache, config)
    return stages.sft, stages.reward_model


def early_late(history, key, width=5):
    values = [row[key] for row in history]
    return sum(values[:width]) / width, sum(values[-width:]) / width


@pytest.mark.slow
def test_grpo_raises_rm_and_gold_reward_grows_kl_and_lowers_entropy(sft_and_reward_model):
    sft, reward_model = sft_and_reward_model
    # the quick setting's first 20 of its 40 iterations: the effects are as clear (measured below)
    _, history, samples = grpo_train(sft, reward_model, REFERENCE, GrpoConfig.setting("quick", iterations=20),
                                     torch.Generator().manual_seed(1), show_progress=False)
    rm_start, rm_end = early_late(history, "reward_model_score")
    gold_start, gold_end = early_late(history, "gold_reward")
    kl_start, kl_end = early_late(history, "kl_to_reference")
    entropy_start, entropy_end = early_late(history, "entropy_per_token")
    # Measured with generator seeds 0-5 on this SFT policy and reward model (one thread), 20 iterations: RM
    # +1.08..+1.44, gold +0.46..+0.61, final KL 4.4..5.2 nats, entropy -0.38..-0.47 nats (40: +1.19..+1.45,
    # +0.51..+0.61, 4.8..6.0, -0.44..-0.55). Bounds at about half of each.
    assert rm_end > rm_start + 0.6
    assert gold_end > gold_start + 0.25
    assert history[0]["kl_to_reference"] == pytest.approx(0.0, abs=1e-5)  # sampled before any step
    assert kl_end > 2.4
    assert entropy_end < entropy_start - 0.22
    assert len(samples["before"]) == len(samples["after"]) == 4
    import matplotlib.pyplot as plt
    axes = plot_ppo_history(history, method="GRPO")
    assert axes[0].get_xlabel() == "GRPO iteration"
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    axes[0].figure.savefig(ARTIFACTS / "grpo.png", dpi=80)
    plt.close(axes[0].figure)


def test_dr_grpo_unscaled_advantages_train_too(sft_and_reward_model):
    sft, reward_model = sft_and_reward_model
    config = GrpoConfig.setting("quick", iterations=10, scale_by_std=False)
    _, history, _ = grpo_train(sft, reward_model, REFERENCE, config, torch.Generator().manual_seed(2), False)
    # unscaled advantages keep the reward's own units: their size is the groups' spread, not about 1
    spread = sum(row["reward_spread_within_groups"] for row in history) / len(history)
    size = sum(row["advantage_abs_mean"] for row in history) / len(history)
    # E|x - mean| is about 0.8 std for a bell curve (measured with generator seeds 0-3: 0.77-0.79)
    assert size == pytest.approx(spread * 0.8, rel=0.35)


@pytest.mark.parametrize("broken, name, says", [
    (lambda r, s=True, e=1e-4: (r - r.mean(1, keepdim=True)) / r.std(1, keepdim=True) * float("nan"),
     "group_relative_advantages", "NaN"),
    (lambda r, s=True, e=1e-4: r.mean(1), "group_relative_advantages", "shape"),
])
def test_a_broken_advantage_function_stops_training_naming_it(sft_and_reward_model, broken, name, says):
    sft, reward_model = sft_and_reward_model
    student = GrpoFunctions.wrap(broken, ppo_clipped_objective, kl_estimator_k3)
    with pytest.raises(StudentFunctionError, match=f"{name}.*{says}"):
        grpo_train(sft, reward_model, student, GrpoConfig.setting("smoke"), torch.Generator().manual_seed(0), False)


def test_a_k3_without_gradient_stops_training_naming_it(sft_and_reward_model):
    sft, reward_model = sft_and_reward_model
    student = GrpoFunctions.wrap(group_relative_advantages, ppo_clipped_objective,
                                 lambda log_p, ref: (ref - log_p).detach().expm1() - (ref - log_p).detach())
    with pytest.raises(StudentFunctionError, match="kl_estimator_k3.*no gradient"):
        grpo_train(sft, reward_model, student, GrpoConfig.setting("smoke"), torch.Generator().manual_seed(0), False)


def test_unknown_settings_are_named():
    with pytest.raises(TypeError, match="kl_coeff"):
        GrpoConfig.setting("quick", kl_coeff=0.1)
    with pytest.raises(ValueError, match="unknown setting 'fast'"):
        GrpoConfig.setting("fast")


def test_the_command_line_trains_from_the_notebooks_and_writes_the_figure(repo, tmp_path, capsys):
    from rlhf_course.lab import grpo
    assert grpo.main([str(repo / "source" / "grpo" / "grpo.ipynb"), "--setting", "smoke", "--out", str(tmp_path)]) == 0
    assert "GRPO on the tiny LM" in capsys.readouterr().out and (tmp_path / "grpo.png").stat().st_size > 10_000


def test_the_command_line_stops_in_the_notebooks_language(repo, tmp_path, capsys, monkeypatch):
    """The Chinese release (its set-up cell sets the language when the command loads it): the stop line,
    its reasons and their separators in Chinese."""
    from rlhf_course import i18n
    from rlhf_course.lab import grpo
    monkeypatch.setattr(i18n, "_language", i18n.ENGLISH)  # restored after the test: loading sets Chinese
    assert grpo.main([str(repo / "release" / "grpo_zh" / "grpo.ipynb"), "--setting", "smoke", "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("GRPO 实验已停止：有 3 个函数还不能运行：group_relative_advantages 还没有实现"), err
    assert "stopped" not in err and "; " not in err and err.count("；") == 2, err
    monkeypatch.setattr(i18n, "_language", i18n.ENGLISH)
    assert grpo.main([str(repo / "release" / "grpo" / "grpo.ipynb"), "--setting", "smoke", "--out", str(tmp_path)]) == 2
    assert capsys.readouterr().err.startswith("GRPO lab stopped: 3 functions are not ready: ")


def test_the_lab_names_the_notebook_it_could_not_find(tmp_path, capsys):
    from rlhf_course.lab import grpo
    (tmp_path / "grpo").mkdir()
    assert grpo.run_in_notebook(group_relative_advantages, tmp_path / "grpo") is None
    assert "ppo_clipped_objective comes from your notebook rlhf*/rlhf_building_blocks.ipynb" in capsys.readouterr().out


@pytest.mark.parametrize("language, first", [("en", "rlhf"), ("zh-CN", "rlhf_zh")])
def test_the_lab_takes_your_functions_from_your_edition_first(tmp_path, monkeypatch, language, first):
    """A student who fetched both editions: the GRPO lab of each edition reads that edition's notebooks first."""
    import nbformat

    from rlhf_course import i18n
    from rlhf_course.lab import grpo
    for folder, notebook, name in (("rlhf", "rlhf_building_blocks.ipynb", "ppo_clipped_objective"),
                                   ("kl_penalty", "kl_penalty.ipynb", "kl_estimator_k3")):
        for edition in ("", "_zh"):
            (tmp_path / f"{folder}{edition}").mkdir()
            source = f"def {name}(*args):\n    return {folder + edition!r}\n"
            answer = nbformat.v4.new_code_cell(source, metadata={"nbgrader": {"solution": True, "grade_id": "answer"}})
            nb = nbformat.v4.new_notebook(cells=[answer])
            nbformat.write(nb, str(tmp_path / f"{folder}{edition}" / notebook))
    monkeypatch.setattr(i18n, "language", lambda: language)
    found = grpo.find_other_functions(tmp_path / "grpo")
    assert found["ppo_clipped_objective"]() == first
    assert found["kl_estimator_k3"]() == first.replace("rlhf", "kl_penalty")
