"""Figures of the lab's training curves.  Pure functions: they draw on given axes and return them."""
from __future__ import annotations

from rlhf_course import figure_output
from rlhf_course.i18n import plot_text as L


def _series(history: list[dict], key: str) -> tuple[list[float], list[float]]:
    xs, ys = [], []
    for index, row in enumerate(history):
        if key in row:
            xs.append(row.get("iteration", row.get("step", index)))
            ys.append(row[key])
    return xs, ys


def plot_ppo_history(history: list[dict], axes=None, method: str = "PPO"):
    """The curves of an RL run against the reward model (PPO, or GRPO with ``method="GRPO"``): RM score
    and gold reward, KL to the reference, entropy; one point per iteration."""
    if axes is None:
        _, axes = figure_output.panels(3, (12, 3.6))
    ax_reward, ax_kl, ax_entropy = axes
    ax_reward.plot(*_series(history, "reward_model_score"), label=L("reward-model score (proxy, SFT std units)"))
    ax_reward.plot(*_series(history, "gold_reward"), label=L("gold reward (truth)"))
    ax_reward.set(title=L("Reward rises"), xlabel=L(f"{method} iteration"), ylabel=L("mean reward per response"))
    ax_reward.legend(loc="lower right", fontsize=8)
    ax_kl.plot(*_series(history, "kl_to_reference"), color="tab:red")
    ax_kl.set(title=L("KL to the reference policy grows"), xlabel=L(f"{method} iteration"),
              ylabel=L("KL(pi || pi_ref) per response (nats)"))
    ax_entropy.plot(*_series(history, "entropy_per_token"), color="tab:purple")
    ax_entropy.set(title=L("Policy entropy falls"), xlabel=L(f"{method} iteration"), ylabel=L("entropy per token (nats)"))
    for ax in axes:
        ax.grid(alpha=0.3)
    return axes


def plot_dpo_history(history: list[dict], axes=None):
    """DPO: implicit reward margin and accuracy; chosen/rejected implicit rewards; gold reward and KL."""
    if axes is None:
        _, axes = figure_output.panels(3, (12, 3.6), right_axis=True)
    ax_margin, ax_rewards, ax_gold = axes
    ax_margin.plot(*_series(history, "implicit_reward_margin"), color="tab:green", label=L("margin (left axis)"))
    ax_margin.set(title=L("Preference margin widens"), xlabel=L("DPO step"),
                  ylabel=L("beta * (log-ratio chosen - rejected)"))
    ax_accuracy = ax_margin.twinx()
    ax_accuracy.plot(*_series(history, "preference_accuracy"), color="tab:gray", alpha=0.6,
                     label=L("accuracy (right axis)"))
    ax_accuracy.set(ylabel=L("preference accuracy"), ylim=(0, 1.05))
    lines = ax_margin.get_lines() + ax_accuracy.get_lines()
    ax_margin.legend(lines, [line.get_label() for line in lines], loc="lower right", fontsize=8)
    ax_rewards.plot(*_series(history, "chosen_implicit_reward"), label=L("chosen y_w"))
    ax_rewards.plot(*_series(history, "rejected_implicit_reward"), label=L("rejected y_l"))
    ax_rewards.axhline(0, color="black", lw=0.6)
    ax_rewards.set(title=L("Implicit rewards"), xlabel=L("DPO step"), ylabel=L("beta * log(pi / pi_ref) (nats)"))
    ax_rewards.legend(fontsize=8)
    ax_gold.plot(*_series(history, "gold_reward"), "o-", label=L("gold reward of samples"))
    ax_gold.set(title=L("Samples get better, at a KL cost"), xlabel=L("DPO step"), ylabel=L("mean gold reward"))
    ax_kl = ax_gold.twinx()
    ax_kl.plot(*_series(history, "kl_to_reference"), "s--", color="tab:red", label=L("KL to reference"))
    ax_kl.set(ylabel=L("KL per response (nats)"))
    lines = ax_gold.get_lines() + ax_kl.get_lines()
    # both curves rise from the lower left: the lower right is where neither is
    ax_gold.legend(lines, [line.get_label() for line in lines], loc="lower right", fontsize=8)
    for ax in (ax_margin, ax_rewards, ax_gold):
        ax.grid(alpha=0.3)
    return axes
