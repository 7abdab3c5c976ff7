"""The lab with the reference functions shows the four effects; a broken function stops it
with one sentence naming the function."""
import json
import time

import pytest
import torch

from rlhf_course import ASSIGNMENT, NOTEBOOK, STUDENT_FUNCTIONS
from rlhf_course.lab import ppo_dpo as demo
from rlhf_course.lab import shared_stages, train
from rlhf_course.lab.notebook_functions import functions_from_notebook
from rlhf_course.lab.student import StudentFunctionError, StudentFunctions, check_before_training
from tests.support.lab_stages import trained_once


@pytest.fixture(scope="module")
def reference_functions(repo):
    return functions_from_notebook(repo / "source" / ASSIGNMENT / NOTEBOOK, STUDENT_FUNCTIONS)


# The quick setting with shorter PPO and DPO runs on its own SFT policy and reward model (150 steps each, shared with
# test_grpo.py and test_frontier.py's sweep): the four effects hold with room to spare (measured at these sizes, one
# thread: held-out RM accuracy 0.947, PPO's RM score +1.54, gold reward +0.69, KL 6.6, entropy -0.64; DPO's margin
# +1.68, accuracy 0.81 -> 0.98, gold reward +0.88, chosen and rejected implicit rewards -2.3 and -4.0).  The quick
# setting itself is the student's (the notebook's lab cell, `make demo`).
SHORTER = dict(ppo_iterations=25, dpo_steps=70)


@pytest.fixture(scope="module")
def result(reference_functions, lab_stage_cache):
    """Its SFT policy and reward model are test_grpo.py's and the frontier sweep's (the quick setting's): trained by
    whichever file gets there first, loaded by the others."""
    if demo.DEFAULT_THREADS:  # run_demo's thread count, which names the cached models
        torch.set_num_threads(demo.DEFAULT_THREADS)
    trained_once(lab_stage_cache, train.LabConfig.setting("quick", **SHORTER))
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("RLHF_LAB_CACHE", str(lab_stage_cache))
        return demo.run_demo(**reference_functions, setting="quick", show_progress=False, **SHORTER)


def early_late(history, key, width=5):
    values = [row[key] for row in history if key in row]
    return sum(values[:width]) / width, sum(values[-width:]) / width


@pytest.mark.slow
def test_reward_model_orders_heldout_pairs_like_gold(result):
    assert result.reward_model.heldout_accuracy > 0.90


@pytest.mark.slow
def test_ppo_raises_rm_score_and_gold_reward_grows_kl_and_lowers_entropy(result):
    rm_start, rm_end = early_late(result.ppo_history, "reward_model_score")
    gold_start, gold_end = early_late(result.ppo_history, "gold_reward")
    kl_start, kl_end = early_late(result.ppo_history, "kl_to_reference")
    entropy_start, entropy_end = early_late(result.ppo_history, "entropy_per_token")
    assert rm_end > rm_start + 1.0           # in units of the SFT samples' RM std
    assert gold_end > gold_start + 0.4       # gold reward lies in about [-1, 1]
    assert result.ppo_history[0]["kl_to_reference"] == pytest.approx(0.0, abs=1e-5)
    assert kl_end > 2.0 and kl_end > kl_start + 2.0
    assert entropy_end < entropy_start - 0.3


@pytest.mark.slow
def test_dpo_widens_margin_and_accuracy_and_improves_gold(result):
    margin_start, margin_end = early_late(result.dpo_history, "implicit_reward_margin")
    accuracy_start, accuracy_end = early_late(result.dpo_history, "preference_accuracy")
    evaluated = [row for row in result.dpo_history if "gold_reward" in row]
    assert margin_end > margin_start + 1.0
    assert accuracy_start < 0.85 and accuracy_end > 0.95
    assert evaluated[-1]["gold_reward"] > evaluated[0]["gold_reward"] + 0.4
    assert evaluated[-1]["kl_to_reference"] > evaluated[0]["kl_to_reference"]
    # the rejected response's implicit reward falls below the chosen one's
    assert result.dpo_history[-1]["rejected_implicit_reward"] < result.dpo_history[-1]["chosen_implicit_reward"]


@pytest.mark.slow
def test_dpo_lowers_both_implicit_rewards_while_the_margin_widens(result):
    """Part 4's third question says so: both beta * log(pi / pi_ref) fall, the rejected one faster."""
    chosen_start, chosen_end = early_late(result.dpo_history, "chosen_implicit_reward")
    rejected_start, rejected_end = early_late(result.dpo_history, "rejected_implicit_reward")
    assert result.dpo_history[0]["chosen_implicit_reward"] == 0.0  # the policy starts as the reference
    assert chosen_end < chosen_start - 1.0      # measured: about -2.3 after 70 steps (-3.9 after the quick 120)
    assert rejected_end < rejected_start - 2.0  # measured: about -4.0 (-6.6 after 120)
    assert rejected_end < chosen_end - 1.0


@pytest.fixture(scope="module")
def cli_metrics(repo, tmp_path_factory) -> dict:
    """`python -m rlhf_course.lab.ppo_dpo source/.../rlhf_building_blocks.ipynb --setting smoke`: its exit code,
    folder and metrics.json."""
    out = tmp_path_factory.mktemp("cli")
    with pytest.MonkeyPatch.context() as patch:
        patch.delenv(shared_stages.CACHE_VARIABLE, raising=False)  # trains its SFT policy and reward model
        code = demo.main([str(repo / "source" / ASSIGNMENT / NOTEBOOK), "--setting", "smoke", "--out", str(out)])
    return {"code": code, "out": out, "metrics": json.loads((out / "metrics.json").read_text()) if code == 0 else None}


@pytest.mark.slow
def test_seeded_runs_repeat_exactly(reference_functions, cli_metrics, monkeypatch):
    """A second smoke run, in this process, repeats the command line's (its SFT policy and reward model trained again:
    no cache) to the last bit; JSON keeps a float's every bit."""
    monkeypatch.delenv(shared_stages.CACHE_VARIABLE, raising=False)
    again = demo.run_demo(**reference_functions, setting="smoke", show_progress=False)
    assert again.ppo_history == cli_metrics["metrics"]["ppo"] and again.dpo_history == cli_metrics["metrics"]["dpo"]


def broken(reference_functions, name, function):
    return {**reference_functions, name: function}


BROKEN = {
    "raises": ("compute_gae", lambda rewards, values, *a, **k: rewards[len(rewards)], "compute_gae raised IndexError"),
    "not_implemented": ("ppo_clipped_objective", None, "ppo_clipped_objective is not implemented yet"),
    "wrong_shape": ("ppo_clipped_objective", lambda ratio, advantage, eps=0.2: (ratio * advantage).mean(1),
                    "ppo_clipped_objective returned shape (4,), expected ()"),
    "nan": ("dpo_loss", lambda w, l, rw, rl, beta=0.1: (w - l) * float("nan"), "dpo_loss returned NaN"),
    "no_gradient": ("dpo_loss", lambda w, l, rw, rl, beta=0.1: torch.zeros_like(w).detach(),
                    "dpo_loss returned a tensor with no gradient"),
    "not_a_tensor": ("compute_gae", lambda rewards, *a, **k: rewards.tolist(),
                     "compute_gae must return a torch.Tensor, got list"),
}


def _not_implemented(*args, **kwargs):
    raise NotImplementedError()


@pytest.mark.parametrize("case", sorted(BROKEN))
def test_broken_student_function_stops_with_named_message(reference_functions, case):
    name, function, message = BROKEN[case]
    functions = broken(reference_functions, name, function or _not_implemented)
    calls = {"n": 0}
    inner = functions[name]

    def counting(*args, **kwargs):
        calls["n"] += 1
        return inner(*args, **kwargs)

    functions[name] = counting
    with pytest.raises(StudentFunctionError, match=message.replace("(", r"\(").replace(")", r"\)")):
        demo.run_demo(**functions, setting="smoke", show_progress=False)
    assert calls["n"] == 1  # stopped at its first call, before any training


def test_every_missing_function_is_named_before_any_training():
    start = time.perf_counter()
    with pytest.raises(StudentFunctionError) as caught:
        demo.run_demo(_not_implemented, _not_implemented, _not_implemented, setting="quick", show_progress=False)
    message = str(caught.value)
    assert message.startswith("3 functions are not ready")
    for name in ("ppo_clipped_objective", "dpo_loss", "compute_gae"):
        assert f"{name} is not implemented yet" in message
    assert time.perf_counter() - start < 5  # the quick setting trains for about ten seconds: it never started


def test_a_function_failing_its_visible_test_is_named_before_training(reference_functions):
    max_for_min = lambda ratio, advantage, eps=0.2: torch.max(  # noqa: E731
        ratio * advantage, torch.clamp(ratio, 1 - eps, 1 + eps) * advantage).mean()
    functions = StudentFunctions.wrap(**broken(reference_functions, "ppo_clipped_objective", max_for_min))
    warnings = check_before_training(functions)
    assert len(warnings) == 1 and warnings[0].startswith("ppo_clipped_objective does not pass its visible test")
    assert "[1.6600], expected [1.0200]" in warnings[0]
    assert check_before_training(StudentFunctions.wrap(**reference_functions)) == []


def test_cli_on_reference_notebook_writes_figures_and_metrics(cli_metrics):
    out = cli_metrics["out"]
    assert cli_metrics["code"] == 0
    assert (out / "ppo.png").stat().st_size > 10_000 and (out / "dpo.png").stat().st_size > 10_000
    assert len(cli_metrics["metrics"]["ppo"]) == 2


def test_cli_on_release_notebook_stops_with_message(repo, tmp_path, capsys):
    code = demo.main([str(repo / "release" / ASSIGNMENT / NOTEBOOK), "--setting", "smoke", "--out", str(tmp_path)])
    assert code == 2
    err = capsys.readouterr().err
    assert "demo stopped:" in err and "is not implemented yet" in err
    assert "Traceback" not in err


def test_cli_on_the_chinese_release_stops_in_chinese(repo, tmp_path, capsys, monkeypatch):
    from rlhf_course import i18n
    monkeypatch.setattr(i18n, "_language", i18n.ENGLISH)  # restored after the test: loading sets Chinese
    code = demo.main([str(repo / "release" / "rlhf_zh" / NOTEBOOK), "--setting", "smoke", "--out", str(tmp_path)])
    err = capsys.readouterr().err
    assert code == 2 and err.startswith("PPO 与 DPO 实验已停止：有 3 个函数还不能运行：ppo_clipped_objective 还没有实现"), err
    assert "stopped" not in err and "; " not in err
