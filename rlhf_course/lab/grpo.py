"""GRPO on the tiny LM: several responses per prompt, each judged against its own group; no value head.

The trainer takes the student's three functions as arguments (a :class:`GrpoFunctions`): the group
advantages, the PPO clipped objective and the k3 KL estimator.  Nothing here implements any of them.

One iteration, for P prompts and G responses each (DeepSeekMath's GRPO, with the same reward model
and SFT reference as the PPO lab):

* sample G responses per prompt from the current policy (``pi_old``); score each with the reward
  model: rewards of shape (P, G);
* advantages (P, G) from the student's ``group_relative_advantages``; each response's advantage is
  broadcast over its tokens as a (P*G, 1) column, which the student's ``ppo_clipped_objective``
  already accepts;
* a few epochs of gradient ascent on ``L^CLIP - kl_coef * mean k3``: the KL to the reference is a
  term of the loss, estimated by the student's ``kl_estimator_k3`` on the sampled tokens, not a
  per-token penalty folded into the reward as in the PPO lab.

Every response has the same length here, so the mean over all tokens equals GRPO's per-sequence
mean followed by the mean over the group: the length bias Dr. GRPO removes cannot show on this
language.
"""
from __future__ import annotations

import copy
import os
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Callable

import torch

from rlhf_course.lab import SETTINGS, language, notebook_setting
from rlhf_course.lab.language import RESPONSE_LENGTH
from rlhf_course.lab.model import PolicyLM, RewardModel, response_stats
from rlhf_course.lab.training_slots import TrainingQueue, training_slot
from rlhf_course.lab.notebook_functions import functions_from_notebook
from rlhf_course import i18n
from rlhf_course.i18n import padded, plot_text, t
from rlhf_course.lab.student import StudentFunctionError, guard
from rlhf_course.lab.train import _examples, _progress, clipped_step, frozen_copy, rollout_metrics


@dataclass(frozen=True)
class GrpoConfig:
    iterations: int = 40
    prompts: int = 8          # P: prompts per iteration
    group_size: int = 8       # G: responses per prompt (P * G = 64, the PPO lab's batch)
    epochs: int = 4
    lr: float = 1e-3
    kl_coef: float = 0.2      # weight of the k3 term in the loss (GRPO's beta): at 0.2 the quick run ends near the PPO lab's KL
    clip_epsilon: float = 0.2
    scale_by_std: bool = True  # False: Dr. GRPO's unscaled advantages
    eps: float = 1e-4
    # "loss": GRPO's k3 term in the loss; "reward": the sequence's log pi - log pi_ref subtracted from its
    # reward before the group advantages (RLOO's and the PPO lab's way), and no KL term in the loss
    kl_in: str = "loss"

    @classmethod
    def setting(cls, name: str, **overrides) -> "GrpoConfig":
        presets = {"quick": {}, "full": dict(iterations=100, prompts=16), "smoke": dict(iterations=2, prompts=2,
                                                                                      group_size=4, epochs=1)}
        if name not in presets:
            raise ValueError(f"unknown setting {name!r}; choose one of {sorted(presets)}")
        unknown = set(overrides) - {f.name for f in fields(cls)}
        if unknown:
            raise TypeError(f"unknown GRPO settings: {sorted(unknown)}")
        return cls(**{**presets[name], **overrides})

    def __post_init__(self):
        if self.kl_in not in ("loss", "reward"):
            raise ValueError(f"kl_in must be 'loss' or 'reward', not {self.kl_in!r}")


@dataclass(frozen=True)
class GrpoFunctions:
    """The three student functions GRPO trains with, each checked on every call."""

    group_relative_advantages: Callable
    ppo_clipped_objective: Callable
    kl_estimator_k3: Callable

    @classmethod
    def wrap(cls, group_relative_advantages: Callable, ppo_clipped_objective: Callable,
             kl_estimator_k3: Callable) -> "GrpoFunctions":
        return cls(
            guard(group_relative_advantages, "group_relative_advantages",
                  lambda rewards, *a, **k: tuple(rewards.shape), needs_grad=False),
            guard(ppo_clipped_objective, "ppo_clipped_objective", lambda *a, **k: (), needs_grad=True),
            guard(kl_estimator_k3, "kl_estimator_k3", lambda log_p, *a, **k: tuple(log_p.shape), needs_grad=True),
        )


def grpo_train(sft_policy: PolicyLM, reward_model: RewardModel, student: GrpoFunctions, config: GrpoConfig,
               generator: torch.Generator, show_progress: bool = True
               ) -> tuple[PolicyLM, list[dict[str, float]], dict]:
    """GRPO against the reward model from the SFT policy, which is also the KL reference.

    Returns the trained policy, one metrics row per iteration (on that iteration's own samples, the
    same keys as the PPO lab's history plus the advantages' spread), and a few sampled responses at
    the start and at the end.
    """
    reference = frozen_copy(sft_policy)
    policy = copy.deepcopy(sft_policy).train()
    optimizer = torch.optim.AdamW(policy.parameters(), lr=config.lr)
    history, first_samples = [], None
    for iteration in _progress(range(config.iterations), "GRPO", show_progress):
        prompts = language.sample_prompts(config.prompts, generator).repeat_interleave(config.group_size, 0)
        with torch.no_grad():
            responses = policy.sample(prompts, RESPONSE_LENGTH, generator)
            old_log_probs, entropy, _ = response_stats(policy, prompts, responses)
            ref_log_probs, _, _ = response_stats(reference, prompts, responses)
            score = reward_model(torch.cat([prompts, responses], 1))
            reward = score - config.kl_coef * (old_log_probs - ref_log_probs).sum(1) if config.kl_in == "reward" else score
            advantages = student.group_relative_advantages(reward.view(config.prompts, config.group_size),
                                                           config.scale_by_std, config.eps)
            column = advantages.reshape(-1, 1)  # one advantage per response, broadcast over its tokens
        for _ in range(config.epochs):
            log_probs, _, _ = response_stats(policy, prompts, responses)
            ratio = torch.exp(log_probs - old_log_probs)
            objective = student.ppo_clipped_objective(ratio, column, config.clip_epsilon)
            if config.kl_in == "loss":
                objective = objective - config.kl_coef * student.kl_estimator_k3(log_probs, ref_log_probs).mean()
            clipped_step(optimizer, -objective, policy)
        history.append({
            "iteration": iteration, **rollout_metrics(score, responses, old_log_probs - ref_log_probs, entropy),
            "reward_spread_within_groups": score.view(config.prompts, config.group_size).std(1).mean().item(),
            "advantage_abs_mean": advantages.abs().mean().item(),
        })
        if first_samples is None:
            first_samples = _examples(prompts, responses, reward_model)
    policy.eval()
    return policy, history, {"before": first_samples, "after": _examples(prompts, responses, reward_model)}


# ----------------------------------------------------------------------------- in the notebook

# Where a student's other two functions live: the assignments fetched beside this one (any edition).
OTHER_FUNCTIONS = (("ppo_clipped_objective", "rlhf*/rlhf_building_blocks.ipynb"),
                   ("kl_estimator_k3", "kl_penalty*/kl_penalty.ipynb"))


def _own_edition(path: Path) -> bool:
    """Whether ``path`` is in the folder of the edition in the language in effect: ``rlhf_zh/`` in Chinese,
    ``rlhf/`` in English (a Chinese student's own notebooks come first)."""
    chinese = path.parent.name.endswith("_zh")
    return chinese == (i18n.language() == i18n.CHINESE)


def find_other_functions(folder: Path) -> dict[str, Callable]:
    """Your ``ppo_clipped_objective`` and ``kl_estimator_k3``, from your own notebooks of the two earlier
    assignments in the folders next to ``folder`` (as ``nbgrader fetch_assignment`` lays them out).
    Raises StudentFunctionError saying which one is missing and where it was looked for."""
    found = {}
    for name, pattern in OTHER_FUNCTIONS:
        candidates = sorted(folder.parent.glob(pattern), key=lambda path: (not _own_edition(path), str(path)))
        if not candidates:
            raise StudentFunctionError(t("{name} comes from your notebook {pattern} next to this folder, and there "
                                         "is none: fetch that assignment first", name=name, pattern=pattern))
        errors = []
        for path in candidates:  # the edition of this notebook's language first, then the others
            try:
                found[name] = functions_from_notebook(path, (name,))[name]
                break
            except Exception as exc:  # the student's own code: say which notebook and what went wrong
                errors.append(f"{path.parent.name}/{path.name}: {type(exc).__name__}: {exc}")
        else:
            raise StudentFunctionError(t("{name} could not be loaded from your notebook ({errors})", name=name,
                                         errors=t("; ").join(errors)))
    return found


def check_before_training(student: GrpoFunctions) -> None:
    """One small call of each function before any training (milliseconds, not the SFT's seconds):
    raises StudentFunctionError naming every function that cannot run."""
    generator = torch.Generator().manual_seed(0)
    calls = {
        "group_relative_advantages": lambda: student.group_relative_advantages(
            torch.randn(2, 4, generator=generator), True, 1e-4),
        "ppo_clipped_objective": lambda: student.ppo_clipped_objective(
            torch.rand(4, 10, generator=generator).add(0.5).requires_grad_(), torch.randn(4, 1, generator=generator), 0.2),
        "kl_estimator_k3": lambda: student.kl_estimator_k3(
            torch.randn(4, 10, generator=generator).requires_grad_(), torch.randn(4, 10, generator=generator)),
    }
    problems = []
    for call in calls.values():
        try:
            call()
        except StudentFunctionError as exc:
            problems.append(str(exc))
    if len(problems) == 1:
        raise StudentFunctionError(problems[0])
    if problems:
        raise StudentFunctionError(t("{count} functions are not ready: ", count=len(problems)) + t("; ").join(problems))


@dataclass
class GrpoLabResult:
    history: list[dict]
    samples: dict
    seconds: dict[str, float]

    def summary(self) -> str:
        first, last = self.history[0], self.history[-1]
        lines = [t("GRPO on the tiny LM, stage times (s): ") + ", ".join(f"{t(k)} {v:.1f}" for k, v in self.seconds.items())]
        for key in ("reward_model_score", "gold_reward", "kl_to_reference", "entropy_per_token"):
            lines.append(f"  {padded(t(key), 32)} {first[key]:8.3f} -> {last[key]:8.3f}")
        return "\n".join(lines)


def run_lab(group_relative_advantages: Callable, ppo_clipped_objective: Callable, kl_estimator_k3: Callable,
            setting: str = "quick", show_progress: bool = True, threads: int | None = None,
            queue: TrainingQueue | None = None, **overrides) -> GrpoLabResult:
    """SFT and the reward model as in the PPO lab (same seed, same models), then GRPO with the three
    functions. Raises StudentFunctionError naming a function that cannot train.  ``threads``: torch's,
    by default the PPO lab's (at most two, never more than the CPUs this process may use).  The training waits
    for a slot of ``queue``, by default the machine's where the hub set one up (rlhf_course/lab/training_slots.py)."""
    import time
    from rlhf_course.lab.shared_stages import sft_and_reward_model
    from rlhf_course.lab.train import LabConfig

    from rlhf_course.lab.threads import lab_threads
    torch.set_num_threads(threads or lab_threads())
    student = GrpoFunctions.wrap(group_relative_advantages, ppo_clipped_objective, kl_estimator_k3)
    check_before_training(student)
    lab_config = LabConfig.setting(setting)
    seconds = {}
    with training_slot(queue):
        start = time.perf_counter()
        shared = sft_and_reward_model(lab_config, show_progress)  # once per machine with RLHF_LAB_CACHE (make hub)
        sft, reward_model, generator = shared.sft, shared.reward_model, shared.generator
        seconds["SFT and reward model"] = time.perf_counter() - start
        start = time.perf_counter()
        _, history, samples = grpo_train(sft, reward_model, student, GrpoConfig.setting(setting, **overrides),
                                         generator, show_progress)
        seconds["GRPO"] = time.perf_counter() - start
    return GrpoLabResult(history, samples, seconds)


def run_in_notebook(group_relative_advantages: Callable, folder: Path | None = None) -> GrpoLabResult | None:
    """The notebook's entry point: your advantages with your clipped objective and k3 from your earlier
    notebooks; one readable line instead of a traceback when something is not ready. Skipped while
    nbgrader runs the notebook. ``RLHF_LAB_SETTING`` (quick, full or smoke) picks the run's length."""
    if os.environ.get("NBGRADER_EXECUTION"):
        print(t("(the lab is skipped while nbgrader runs this notebook: run it yourself in JupyterLab)"))
        return None
    try:
        others = find_other_functions(Path(folder or Path.cwd()))
        result = run_lab(group_relative_advantages, **others, setting=notebook_setting())
    except StudentFunctionError as exc:
        print(t("The lab stopped: {reason}", reason=exc))
        return None
    print(result.summary())
    return result


def show_in_notebook(result: GrpoLabResult | None) -> None:
    if result is None:
        return
    from rlhf_course import figure_output
    from rlhf_course.lab.plots import plot_ppo_history
    plot_ppo_history(result.history, method="GRPO")
    figure_output.show()


def main(argv: list[str] | None = None) -> int:
    """``python -m rlhf_course.lab.grpo NOTEBOOK [--setting quick] [--out DIR]``: GRPO on the tiny LM with the
    notebook's ``group_relative_advantages`` and the other two functions from the notebooks beside its folder;
    prints the summary, writes ``grpo.png`` into ``--out``."""
    import argparse
    import sys

    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("notebook", type=Path)
    parser.add_argument("--setting", default="quick", choices=SETTINGS)
    parser.add_argument("--out", type=Path, default=Path("outputs/demo"))
    args = parser.parse_args(argv)
    try:
        advantages = functions_from_notebook(args.notebook, ("group_relative_advantages",))
        others = find_other_functions(args.notebook.resolve().parent)
        result = run_lab(**advantages, **others, setting=args.setting,
                         show_progress=sys.stderr.isatty() or "CI" not in os.environ)
    except (StudentFunctionError, LookupError) as exc:
        print(t("GRPO lab stopped: {reason}", reason=exc), file=sys.stderr)
        return 2
    print(result.summary())
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from rlhf_course.lab.plots import plot_ppo_history
    args.out.mkdir(parents=True, exist_ok=True)
    fig, axes = plt.subplots(1, 3, figsize=(14, 3.8), constrained_layout=True)
    plot_ppo_history(result.history, axes, method="GRPO")
    fig.suptitle(plot_text("GRPO on the tiny LM (no value head)"))
    fig.savefig(args.out / "grpo.png", dpi=110)
    print(t("figure:"), args.out / "grpo.png")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
