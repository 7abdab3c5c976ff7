"""The four stages of the lab: SFT, reward model, PPO-RLHF and DPO.

PPO and DPO take the student's functions as arguments (a :class:`StudentFunctions`); nothing
here implements the clipped objective, the DPO loss or GAE.
"""
from __future__ import annotations

import copy
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from tqdm.auto import tqdm

from rlhf_course.i18n import t
from rlhf_course.lab import language
from rlhf_course.lab.language import RESPONSE_LENGTH, gold_reward
from rlhf_course.lab.model import PolicyLM, RewardModel, response_stats
from rlhf_course.lab.student import StudentFunctions


@dataclass(frozen=True)
class LabConfig:
    seed: int = 0
    sft_sequences: int = 3000
    sft_steps: int = 150
    sft_batch: int = 128
    sft_lr: float = 5e-3
    rm_pairs: int = 2000
    rm_heldout_pairs: int = 600
    rm_steps: int = 150
    rm_batch: int = 64
    rm_lr: float = 3e-3
    ppo_iterations: int = 40
    ppo_batch: int = 64
    ppo_epochs: int = 4
    ppo_lr: float = 1e-3
    kl_coef: float = 0.05
    clip_epsilon: float = 0.2
    gamma: float = 1.0
    gae_lambda: float = 0.95
    value_coef: float = 0.5
    dpo_pairs: int = 1500
    dpo_steps: int = 120
    dpo_batch: int = 64
    dpo_lr: float = 1e-3
    dpo_beta: float = 0.1
    eval_every: int = 10
    eval_batch: int = 128

    @classmethod
    def setting(cls, name: str, **overrides) -> "LabConfig":
        presets = {
            "quick": {},
            "full": dict(sft_steps=300, rm_steps=300, rm_batch=128, rm_pairs=4000, ppo_iterations=100,
                         ppo_batch=128, dpo_steps=250, dpo_pairs=3000, eval_every=10, eval_batch=256),
            "smoke": dict(sft_sequences=256, sft_steps=5, rm_pairs=128, rm_heldout_pairs=64, rm_steps=5,
                          ppo_iterations=2, ppo_batch=16, ppo_epochs=1, dpo_pairs=64, dpo_steps=2,
                          eval_every=1, eval_batch=16),
        }
        if name not in presets:
            raise ValueError(f"unknown setting {name!r}; choose one of {sorted(presets)}")
        return cls(**{**presets[name], **overrides})


def _progress(iterable, description: str, show: bool):
    """A progress bar named in the student's language."""
    return tqdm(iterable, desc=t(description), leave=False, disable=not show, mininterval=0.5)


# ----------------------------------------------------------------------------- SFT

def train_sft(config: LabConfig, generator: torch.Generator, show_progress: bool = True) -> PolicyLM:
    """Supervised fine-tuning on the corpus: the SFT policy, which is also the reference."""
    corpus = language.sample_corpus(config.sft_sequences, generator)
    policy = PolicyLM()
    optimizer = torch.optim.AdamW(policy.parameters(), lr=config.sft_lr)
    for _ in _progress(range(config.sft_steps), "SFT", show_progress):
        batch = corpus[torch.randint(0, len(corpus), (config.sft_batch,), generator=generator)]
        logits, _ = policy(batch[:, :-1])
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), batch[:, 1:].reshape(-1))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return policy.eval()


# ----------------------------------------------------------------------------- preference data

@dataclass
class PreferencePairs:
    """Two SFT responses to one prompt, ordered by the gold reward (ties dropped)."""

    prompts: torch.Tensor   # (N, PROMPT_LENGTH)
    chosen: torch.Tensor    # (N, RESPONSE_LENGTH)
    rejected: torch.Tensor  # (N, RESPONSE_LENGTH)

    def __len__(self) -> int:
        return len(self.prompts)

    def sequences(self) -> tuple[torch.Tensor, torch.Tensor]:
        return torch.cat([self.prompts, self.chosen], 1), torch.cat([self.prompts, self.rejected], 1)


CHUNK = 512  # rows per no-grad forward: keeps peak memory flat for large sample sets


@torch.no_grad()
def in_chunks(function, *tensors: torch.Tensor) -> torch.Tensor:
    """``function`` applied to row chunks of the tensors, results concatenated."""
    return torch.cat([function(*(t[i:i + CHUNK] for t in tensors)) for i in range(0, len(tensors[0]), CHUNK)])


def sample_preferences(policy: PolicyLM, count: int, generator: torch.Generator,
                       without_repeats: bool = False) -> PreferencePairs:
    """Pairs of policy samples for the same prompt, ordered by the gold reward (ties dropped).

    ``without_repeats`` keeps only pairs in which neither response repeats a word: the labellers
    never met repetitive text, so a reward model trained on them has a blind spot, as real reward
    models have for what their data never showed.
    """
    prompts = language.sample_prompts(3 * count, generator)
    def respond(p):
        return policy.sample(p, RESPONSE_LENGTH, generator)
    first, second = in_chunks(respond, prompts), in_chunks(respond, prompts)
    gold_first, gold_second = gold_reward(first), gold_reward(second)
    keep = gold_first != gold_second
    if without_repeats:
        keep &= ~language.has_adjacent_repeat(first) & ~language.has_adjacent_repeat(second)
    first_wins = (gold_first > gold_second)[keep]
    prompts, first, second = prompts[keep][:count], first[keep][:count], second[keep][:count]
    first_wins = first_wins[:count].unsqueeze(1)
    return PreferencePairs(prompts, torch.where(first_wins, first, second), torch.where(first_wins, second, first))


# ----------------------------------------------------------------------------- reward model

@dataclass
class RewardModelReport:
    heldout_accuracy: float  # fraction of held-out pairs the RM orders like the gold reward
    train_accuracy: float
    # the labelled pairs it was fitted on (the first rm_pairs sampled), for a DPO run on the same data
    training_pairs: PreferencePairs | None = field(default=None, repr=False, compare=False)


def train_reward_model(sft_policy: PolicyLM, config: LabConfig, generator: torch.Generator,
                       show_progress: bool = True) -> tuple[RewardModel, RewardModelReport]:
    """Bradley-Terry reward model on SFT pairs labelled by the gold reward.

    The preference probability is sigmoid(score_w - score_l); it is fitted as a binary
    classifier on that logit.  The backbone starts from the SFT policy's.
    """
    pairs = sample_preferences(sft_policy, config.rm_pairs + config.rm_heldout_pairs, generator, without_repeats=True)
    chosen, rejected = pairs.sequences()
    train, heldout = slice(0, config.rm_pairs), slice(config.rm_pairs, None)
    reward_model = RewardModel()
    reward_model.backbone.load_state_dict(sft_policy.backbone.state_dict())
    optimizer = torch.optim.AdamW(reward_model.parameters(), lr=config.rm_lr)
    n_train = len(chosen[train])
    for _ in _progress(range(config.rm_steps), "reward model", show_progress):
        index = torch.randint(0, n_train, (config.rm_batch,), generator=generator)
        score_w, score_l = reward_model(torch.cat([chosen[index], rejected[index]])).chunk(2)
        logit = score_w - score_l
        loss = F.binary_cross_entropy_with_logits(logit, torch.ones_like(logit))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    reward_model.eval()
    reward_model.normalise_on(torch.cat([chosen[:CHUNK], rejected[:CHUNK]]))
    with torch.no_grad():
        def accuracy(part: slice) -> float:
            return (in_chunks(reward_model, chosen[part]) > in_chunks(reward_model, rejected[part])).float().mean().item()
        report = RewardModelReport(heldout_accuracy=accuracy(heldout), train_accuracy=accuracy(train),
                                   training_pairs=PreferencePairs(pairs.prompts[train], pairs.chosen[train],
                                                                  pairs.rejected[train]))
    for p in reward_model.parameters():
        p.requires_grad_(False)
    return reward_model, report


# ----------------------------------------------------------------------------- evaluation

@torch.no_grad()
def evaluate_policy(policy: PolicyLM, reference: PolicyLM, reward_model: RewardModel,
                    prompts: torch.Tensor, generator: torch.Generator) -> dict[str, float]:
    """Sample from the policy; score with the RM and the gold reward; KL and entropy to report."""
    responses = policy.sample(prompts, RESPONSE_LENGTH, generator)
    log_probs, entropy, _ = response_stats(policy, prompts, responses)
    ref_log_probs, _, _ = response_stats(reference, prompts, responses)
    return {
        "reward_model_score": reward_model(torch.cat([prompts, responses], 1)).mean().item(),
        "gold_reward": gold_reward(responses).mean().item(),
        # KL(pi || pi_ref) per response: sum over tokens of log pi - log pi_ref on policy samples.
        "kl_to_reference": (log_probs - ref_log_probs).sum(1).mean().item(),
        "entropy_per_token": entropy.mean().item(),
    }


def frozen_copy(policy: PolicyLM) -> PolicyLM:
    reference = copy.deepcopy(policy).eval()
    for p in reference.parameters():
        p.requires_grad_(False)
    return reference


# ----------------------------------------------------------------------------- PPO and GRPO

def clipped_step(optimizer: torch.optim.Optimizer, loss: torch.Tensor, policy: PolicyLM) -> None:
    """One gradient step on ``loss``, the gradient's norm clipped at 1 (the RL trainers' step)."""
    optimizer.zero_grad()
    loss.backward()
    torch.nn.utils.clip_grad_norm_(policy.parameters(), 1.0)
    optimizer.step()


def rollout_metrics(score: torch.Tensor, responses: torch.Tensor, per_token_kl: torch.Tensor,
                    entropy: torch.Tensor) -> dict[str, float]:
    """What an RL iteration reports of its own samples: reward-model score (B,), gold reward, KL to the
    reference per response (the sum over tokens of log pi - log pi_ref, (B, T)) and entropy per token (B, T)."""
    return {"reward_model_score": score.mean().item(), "gold_reward": gold_reward(responses).mean().item(),
            "kl_to_reference": per_token_kl.sum(1).mean().item(), "entropy_per_token": entropy.mean().item()}


def ppo_rlhf(sft_policy: PolicyLM, reward_model: RewardModel, student: StudentFunctions,
             config: LabConfig, generator: torch.Generator, show_progress: bool = True,
             kl_coef: float | None = None) -> tuple[PolicyLM, list[dict[str, float]], list[dict]]:
    """PPO against the reward model with a per-token KL penalty to the SFT policy.

    Returns the trained policy, one metrics row per iteration (on the iteration's own samples),
    and a few sampled responses at the start and at the end.
    """
    kl_coef = config.kl_coef if kl_coef is None else kl_coef
    reference = frozen_copy(sft_policy)
    policy = copy.deepcopy(sft_policy).train()
    optimizer = torch.optim.AdamW(policy.parameters(), lr=config.ppo_lr)
    history = []
    for iteration in _progress(range(config.ppo_iterations), "PPO", show_progress):
        prompts = language.sample_prompts(config.ppo_batch, generator)
        with torch.no_grad():
            responses = policy.sample(prompts, RESPONSE_LENGTH, generator)
            old_log_probs, entropy, values = response_stats(policy, prompts, responses)
            ref_log_probs, _, _ = response_stats(reference, prompts, responses)
            score = reward_model(torch.cat([prompts, responses], 1))
            per_token_kl = old_log_probs - ref_log_probs
            # Sparse reward: a KL penalty on every token, the RM score on the last one.
            rewards = -kl_coef * per_token_kl
            rewards[:, -1] += score
            # Responses have a fixed length and are complete: V(s_T) = 0.
            advantages = torch.stack([student.compute_gae(rewards[i], values[i], 0.0, config.gamma,
                                                           config.gae_lambda) for i in range(len(rewards))])
            returns = advantages + values
            advantages = (advantages - advantages.mean()) / (advantages.std() + 1e-8)
        for _ in range(config.ppo_epochs):
            log_probs, _, new_values = response_stats(policy, prompts, responses)
            ratio = torch.exp(log_probs - old_log_probs)
            objective = student.ppo_clipped_objective(ratio, advantages, config.clip_epsilon)
            value_loss = F.mse_loss(new_values, returns)
            loss = -objective + config.value_coef * value_loss
            clipped_step(optimizer, loss, policy)
        history.append({"iteration": iteration, **rollout_metrics(score, responses, per_token_kl, entropy),
                        "value_loss": value_loss.item()})
        if iteration == 0:
            first_samples = _examples(prompts, responses, reward_model)
    policy.eval()
    return policy, history, {"before": first_samples, "after": _examples(prompts, responses, reward_model)}


def _examples(prompts, responses, reward_model, count: int = 4) -> list[dict]:
    with torch.no_grad():
        scores = reward_model(torch.cat([prompts[:count], responses[:count]], 1))
    gold = gold_reward(responses[:count])
    return [{"prompt": language.decode(prompts[i]), "response": language.decode(responses[i]),
             "reward_model_score": round(scores[i].item(), 3), "gold_reward": round(gold[i].item(), 3)}
            for i in range(min(count, len(prompts)))]


# ----------------------------------------------------------------------------- DPO

def sequence_log_prob(policy: PolicyLM, prompts: torch.Tensor, responses: torch.Tensor) -> torch.Tensor:
    """log pi(y | x) of whole responses: the sum of their token log-probabilities, shape (B,)."""
    log_probs, _, _ = response_stats(policy, prompts, responses)
    return log_probs.sum(1)


def dpo_train(sft_policy: PolicyLM, reward_model: RewardModel, pairs: PreferencePairs,
              student: StudentFunctions, config: LabConfig, generator: torch.Generator,
              show_progress: bool = True, beta: float | None = None
              ) -> tuple[PolicyLM, list[dict[str, float]]]:
    """DPO on gold-labelled preference pairs, starting from (and regularised towards) the SFT policy."""
    beta = config.dpo_beta if beta is None else beta
    reference = frozen_copy(sft_policy)
    policy = copy.deepcopy(sft_policy).train()
    optimizer = torch.optim.AdamW(policy.parameters(), lr=config.dpo_lr)
    with torch.no_grad():
        ref_chosen = sequence_log_prob(reference, pairs.prompts, pairs.chosen)
        ref_rejected = sequence_log_prob(reference, pairs.prompts, pairs.rejected)
    eval_prompts = language.sample_prompts(config.eval_batch, generator)
    history = []
    for step in _progress(range(config.dpo_steps), "DPO", show_progress):
        index = torch.randint(0, len(pairs), (config.dpo_batch,), generator=generator)
        log_p_w = sequence_log_prob(policy, pairs.prompts[index], pairs.chosen[index])
        log_p_l = sequence_log_prob(policy, pairs.prompts[index], pairs.rejected[index])
        losses = student.dpo_loss(log_p_w, log_p_l, ref_chosen[index], ref_rejected[index], beta)
        optimizer.zero_grad()
        losses.mean().backward()
        optimizer.step()
        with torch.no_grad():
            chosen_reward = beta * (log_p_w - ref_chosen[index])      # implicit rewards
            rejected_reward = beta * (log_p_l - ref_rejected[index])
            row = {
                "step": step,
                "loss": losses.mean().item(),
                "implicit_reward_margin": (chosen_reward - rejected_reward).mean().item(),
                # ties (as at the start, when policy = reference) count as half right
                "preference_accuracy": ((chosen_reward > rejected_reward).float()
                                        + 0.5 * (chosen_reward == rejected_reward).float()).mean().item(),
                "chosen_implicit_reward": chosen_reward.mean().item(),
                "rejected_implicit_reward": rejected_reward.mean().item(),
            }
        if step % config.eval_every == 0 or step == config.dpo_steps - 1:
            policy.eval()
            row.update(evaluate_policy(policy, reference, reward_model, eval_prompts, generator))
            policy.train()
        history.append(row)
    policy.eval()
    return policy, history
