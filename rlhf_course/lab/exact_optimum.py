"""The exact optimum of the KL-regularised RLHF objective, for a first-order Markov reference.

For a reference policy pi_ref and a reward r, the maximiser of

    E_{y ~ pi}[r(x, y)] - beta KL(pi(.|x) || pi_ref(.|x))

is pi*_beta(y|x) = pi_ref(y|x) exp(r(x, y)/beta) / Z_beta(x).  It is intractable for a transformer
reference (Z sums over 24^10 responses), but exact when

* the reference is a first-order Markov chain (a bigram): pi_ref(y|x) = prod_t T[y_{t-1}, y_t] with
  y_0 = the last prompt word, and
* the reward decomposes over positions and adjacent pairs: r(x, y) = sum_t R_t[y_{t-1}, y_t].

The toy language's gold reward, (#positive - #negative - #adjacent repeats)/10, is such a reward:
R_1[a, b] = s(b)/10 (a prompt word followed by the same response word is not a repeat) and
R_t[a, b] = (s(b) - [a = b])/10 for t >= 2.

Then Z follows from a backward recursion over positions (as the partition function of a linear-chain
CRF), pi*_beta is again a Markov chain (time-inhomogeneous), and E_{pi*}[r] and KL(pi* || pi_ref)
follow from a forward pass over its marginals, exactly, for every beta.  Everything is float64 numpy.

Also here: fitting the bigram (counts, smoothed) and :class:`BigramResidualPolicy`, a transformer
policy whose logits are the bigram's log-probabilities plus a learned residual that starts at zero:
it *is* the bigram before training, so PPO and DPO started from it are regularised towards exactly
the reference whose optimum we know.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from rlhf_course.lab import language
from rlhf_course.lab.model import PolicyLM


def logsumexp(a: np.ndarray, axis: int) -> np.ndarray:
    """log sum exp over ``axis``; rows that are all -inf give -inf (no warning, no NaN)."""
    top = np.max(a, axis=axis, keepdims=True)
    safe = np.where(np.isfinite(top), top, 0.0)
    with np.errstate(divide="ignore"):
        out = np.log(np.sum(np.exp(a - safe), axis=axis, keepdims=True)) + safe
    return np.squeeze(out, axis=axis)


@dataclass(frozen=True)
class MarkovReference:
    """pi_ref(y|x) = prod_t transition[y_{t-1}, y_t], y_0 = the context (last prompt word).

    ``context_probs`` is the distribution of the context over prompts: every expectation over x is
    a weighted sum over it.
    """

    transition: np.ndarray     # (V, V), rows sum to 1
    context_probs: np.ndarray  # (V,)
    length: int

    @property
    def log_transition(self) -> np.ndarray:
        with np.errstate(divide="ignore"):
            return np.log(self.transition)


def gold_step_rewards(vocab_size: int = language.VOCAB_SIZE, length: int = language.RESPONSE_LENGTH,
                      sentiment: np.ndarray | None = None, repeat_penalty: float = 1.0,
                      scale: float = 10.0) -> np.ndarray:
    """R of shape (length, V, V): R[t-1][a, b] is the reward of word b at response position t after a.

    Default: the toy language's gold reward, (#positive - #negative - #adjacent repeats)/10.
    """
    s = language._SENTIMENT.double().numpy() if sentiment is None else np.asarray(sentiment, float)
    assert len(s) == vocab_size
    rewards = np.broadcast_to(s / scale, (length, vocab_size, vocab_size)).copy()
    rewards[1:] -= repeat_penalty / scale * np.eye(vocab_size)  # no repeat across the prompt boundary
    return rewards


@dataclass(frozen=True)
class Optimum:
    """pi*_beta for every context: its log partition function, expected reward and KL (per context
    and averaged over contexts), and its step transition matrices."""

    beta: float
    log_z: np.ndarray          # (V,) log Z_beta(x) per context
    reward: np.ndarray         # (V,) E_{pi*}[r | x]
    kl: np.ndarray             # (V,) KL(pi*(.|x) || pi_ref(.|x))
    steps: np.ndarray          # (length, V, V): pi*(y_t = b | y_{t-1} = a)
    mean_reward: float
    mean_kl: float
    mean_log_z: float


def solve(reference: MarkovReference, rewards: np.ndarray, beta: float) -> Optimum:
    """pi*_beta(y|x) ∝ pi_ref(y|x) exp(r(x,y)/beta), exactly: backward recursion for Z, forward for
    the marginals.  ``beta = inf`` gives the reference itself."""
    length, vocab = rewards.shape[0], reference.transition.shape[0]
    assert rewards.shape == (reference.length, vocab, vocab)
    log_t = reference.log_transition
    scaled = np.zeros_like(rewards) if np.isinf(beta) else rewards / beta
    # Backward: log_m[t](a) = log sum over the rest of the response given y_t = a (t = 0: the context).
    log_m = np.zeros((length + 1, vocab))
    scores = np.empty((length, vocab, vocab))
    for t in range(length, 0, -1):
        scores[t - 1] = log_t + scaled[t - 1] + log_m[t][None, :]
        log_m[t - 1] = logsumexp(scores[t - 1], axis=1)
    with np.errstate(invalid="ignore"):
        steps = np.exp(scores - log_m[:length, :, None])
    steps = np.nan_to_num(steps)  # rows of unreachable states (log_m = -inf) carry no mass
    # Forward: the distribution of y_{t-1} for each context (one row per context).
    marginal = np.eye(vocab)
    reward = np.zeros(vocab)
    kl = np.zeros(vocab)
    with np.errstate(divide="ignore", invalid="ignore"):
        log_ratio = np.where(steps > 0, np.log(np.where(steps > 0, steps, 1.0)) - log_t, 0.0)
    for t in range(length):
        joint = marginal[:, :, None] * steps[t][None]   # (context, a, b)
        reward += np.einsum("cab,ab->c", joint, rewards[t])
        kl += np.einsum("cab,ab->c", joint, log_ratio[t])
        marginal = joint.sum(axis=1)
    w = reference.context_probs
    return Optimum(beta=float(beta), log_z=log_m[0], reward=reward, kl=kl, steps=steps,
                   mean_reward=float(w @ reward), mean_kl=float(w @ kl), mean_log_z=float(w @ log_m[0]))


@dataclass(frozen=True)
class Frontier:
    """The exact reward-KL frontier: for each beta, the optimum's mean reward and mean KL."""

    betas: np.ndarray
    reward: np.ndarray
    kl: np.ndarray
    log_z: np.ndarray
    max_reward: float  # E_x max_y r(x, y) over responses the reference can produce: the beta -> 0 limit

    def best_reward_at(self, kl: float | np.ndarray) -> np.ndarray:
        """The largest mean reward any policy reaches with mean KL <= ``kl``.

        By duality, E_pi[r] - beta KL(pi) <= beta E_x log Z_beta(x) for every policy and beta, so
        E_pi[r] <= min_beta beta (E_x log Z_beta + KL(pi)), with equality at the optimum.  The
        minimum over this frontier's (dense) beta grid is an upper bound, tight up to the grid;
        unlike interpolating between points of a concave curve it never undershoots the curve.  No
        policy beats the best response either, which is the bound beyond the greedy limit's KL.
        """
        kl = np.atleast_1d(np.asarray(kl, float))
        bound = self.betas[None, :] * (self.log_z[None, :] + np.maximum(kl, 0.0)[:, None])
        return np.minimum(bound.min(axis=1), self.max_reward)

    def as_dict(self) -> dict:
        return {"beta": self.betas.tolist(), "gold_reward": self.reward.tolist(), "kl_to_reference": self.kl.tolist(),
                "log_z": self.log_z.tolist(), "max_reward": self.max_reward}

    @classmethod
    def from_dict(cls, data: dict) -> "Frontier":
        return cls(np.array(data["beta"]), np.array(data["gold_reward"]), np.array(data["kl_to_reference"]),
                   np.array(data["log_z"]), float(data["max_reward"]))


def frontier(reference: MarkovReference, rewards: np.ndarray, betas: np.ndarray | None = None) -> Frontier:
    """The exact frontier over a log-spaced grid of beta (default 1e-3 to 1e3, 400 values)."""
    betas = np.logspace(-3, 3, 400) if betas is None else np.asarray(betas, float)
    solved = [solve(reference, rewards, b) for b in betas]
    return Frontier(betas, np.array([o.mean_reward for o in solved]), np.array([o.mean_kl for o in solved]),
                    np.array([o.mean_log_z for o in solved]), best_response_reward(reference, rewards))


def best_response_reward(reference: MarkovReference, rewards: np.ndarray) -> float:
    """E_x max_y r(x, y) over the responses with positive reference probability (max-sum recursion)."""
    allowed = np.where(reference.transition > 0, 0.0, -np.inf)
    best = np.zeros(reference.transition.shape[0])
    for t in range(reference.length, 0, -1):
        best = np.max(rewards[t - 1] + allowed + best[None, :], axis=1)
    return float(reference.context_probs @ best)


# ----------------------------------------------------------------------------- the toy language's bigram

def prompt_context_probs() -> np.ndarray:
    """The exact distribution of the last prompt word under :func:`language.sample_prompts`.

    A word is neutral with probability 0.4 and positive with probability 0.6 E[mood] = 0.3; the
    repeat fix moves a word to the next one of its own group, so within a group the words stay
    uniform (the process is symmetric under shifting every group cyclically).
    """
    return np.concatenate([np.full(8, 0.3 / 8), np.full(8, 0.3 / 8), np.full(8, 0.4 / 8)])


def fit_bigram(sequences: torch.Tensor, smoothing: float = 0.5) -> np.ndarray:
    """Maximum-likelihood transition matrix of token sequences (B, L), with add-``smoothing`` counts
    so that no transition (a repeat, say) has probability zero.

    Fitted to samples of the SFT policy it is the SFT policy's closest bigram in KL(SFT || bigram).
    """
    vocab = language.VOCAB_SIZE
    previous, following = sequences[:, :-1].reshape(-1), sequences[:, 1:].reshape(-1)
    counts = torch.bincount(previous * vocab + following, minlength=vocab * vocab).reshape(vocab, vocab)
    counts = counts.double().numpy() + smoothing
    return counts / counts.sum(axis=1, keepdims=True)


def toy_reference(transition: np.ndarray) -> MarkovReference:
    return MarkovReference(np.asarray(transition, float), prompt_context_probs(), language.RESPONSE_LENGTH)


class BigramResidualPolicy(PolicyLM):
    """A :class:`PolicyLM` whose next-word logits are log T[previous word] + the transformer's output.

    The language-model head starts at zero, so before training the policy is exactly the bigram T
    (up to float32 rounding); PPO and DPO then train the whole transformer.  The backbone (and
    value head) start from ``backbone_from`` if given, e.g. the SFT transformer's.
    """

    def __init__(self, transition: np.ndarray, backbone_from: PolicyLM | None = None, **sizes):
        super().__init__(**sizes)
        if backbone_from is not None:
            self.backbone.load_state_dict(backbone_from.backbone.state_dict())
            self.value_head.load_state_dict(backbone_from.value_head.state_dict())
        torch.nn.init.zeros_(self.lm_head.weight)
        torch.nn.init.zeros_(self.lm_head.bias)
        self.register_buffer("log_transition", torch.log(torch.as_tensor(transition, dtype=torch.float32)))

    def forward(self, tokens: torch.Tensor):
        logits, values = super().forward(tokens)
        return logits + self.log_transition[tokens], values

    @torch.no_grad()
    def sample(self, prompts: torch.Tensor, length: int, generator: torch.Generator) -> torch.Tensor:
        hidden, cache = self.backbone(prompts)
        previous = prompts[:, -1]
        tokens = []
        for step in range(length):
            logits = self.lm_head(hidden[:, -1]) + self.log_transition[previous]
            token = torch.multinomial(torch.softmax(logits, dim=-1), 1, generator=generator)
            tokens.append(token)
            previous = token[:, 0]
            if step + 1 < length:
                hidden, cache = self.backbone(token, cache, start=prompts.shape[1] + step)
        return torch.cat(tokens, dim=1)
