"""A tiny causal transformer (~70k parameters): the policy with its value head, and the reward model."""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from rlhf_course.lab.language import PROMPT_LENGTH, SEQUENCE_LENGTH, VOCAB_SIZE

KVCache = list[tuple[torch.Tensor, torch.Tensor]]


class Block(nn.Module):
    def __init__(self, width: int, heads: int, hidden: int):
        super().__init__()
        self.heads = heads
        self.norm_attention = nn.LayerNorm(width)
        self.qkv = nn.Linear(width, 3 * width)
        self.out = nn.Linear(width, width)
        self.norm_mlp = nn.LayerNorm(width)
        self.mlp = nn.Sequential(nn.Linear(width, hidden), nn.GELU(), nn.Linear(hidden, width))

    def forward(self, x: torch.Tensor, cache: tuple[torch.Tensor, torch.Tensor] | None = None):
        batch, length, width = x.shape
        q, k, v = self.qkv(self.norm_attention(x)).split(width, dim=-1)
        q, k, v = (t.view(batch, length, self.heads, -1).transpose(1, 2) for t in (q, k, v))
        if cache is not None:
            k = torch.cat([cache[0], k], dim=2)
            v = torch.cat([cache[1], v], dim=2)
        # With a cache only new positions are fed, one at a time; each may see every cached key.
        attended = F.scaled_dot_product_attention(q, k, v, is_causal=cache is None and length > 1)
        x = x + self.out(attended.transpose(1, 2).reshape(batch, length, width))
        x = x + self.mlp(self.norm_mlp(x))
        return x, (k, v)


class TinyTransformer(nn.Module):
    """Token + position embeddings and a few pre-norm blocks; returns hidden states (B, L, width)."""

    def __init__(self, width: int = 64, layers: int = 2, heads: int = 4, hidden: int = 128):
        super().__init__()
        self.token_embedding = nn.Embedding(VOCAB_SIZE, width)
        self.position_embedding = nn.Embedding(SEQUENCE_LENGTH, width)
        self.blocks = nn.ModuleList(Block(width, heads, hidden) for _ in range(layers))
        self.norm = nn.LayerNorm(width)

    def forward(self, tokens: torch.Tensor, cache: KVCache | None = None, start: int = 0):
        positions = torch.arange(start, start + tokens.shape[1])
        x = self.token_embedding(tokens) + self.position_embedding(positions)
        new_cache = []
        for i, block in enumerate(self.blocks):
            x, layer_cache = block(x, None if cache is None else cache[i])
            new_cache.append(layer_cache)
        return self.norm(x), new_cache


class PolicyLM(nn.Module):
    """Next-token distribution pi(a_t | s_t) plus a value head V(s_t) on the same hidden states."""

    def __init__(self, **sizes):
        super().__init__()
        self.backbone = TinyTransformer(**sizes)
        width = self.backbone.token_embedding.embedding_dim
        self.lm_head = nn.Linear(width, VOCAB_SIZE)
        self.value_head = nn.Linear(width, 1)

    def forward(self, tokens: torch.Tensor):
        hidden, _ = self.backbone(tokens)
        return self.lm_head(hidden), self.value_head(hidden).squeeze(-1)

    @torch.no_grad()
    def sample(self, prompts: torch.Tensor, length: int, generator: torch.Generator) -> torch.Tensor:
        """Responses (B, length) sampled token by token with a KV cache."""
        hidden, cache = self.backbone(prompts)
        tokens = []
        for step in range(length):
            probs = torch.softmax(self.lm_head(hidden[:, -1]), dim=-1)
            token = torch.multinomial(probs, 1, generator=generator)
            tokens.append(token)
            if step + 1 < length:
                hidden, cache = self.backbone(token, cache, start=prompts.shape[1] + step)
        return torch.cat(tokens, dim=1)


def response_stats(policy: PolicyLM, prompts: torch.Tensor, responses: torch.Tensor):
    """Per response token t (state s_t = prompt + response[:t]), all of shape (B, T):

    log pi(a_t|s_t) of the token taken, the entropy of pi(.|s_t) in nats, and V(s_t).
    """
    logits, values = policy(torch.cat([prompts, responses], dim=1))
    start = prompts.shape[1] - 1  # the position whose output predicts the first response token
    logits = logits[:, start:start + responses.shape[1]]
    log_probs = torch.log_softmax(logits, dim=-1)
    token_log_probs = log_probs.gather(-1, responses.unsqueeze(-1)).squeeze(-1)
    entropy = -(log_probs.exp() * log_probs).sum(-1)
    return token_log_probs, entropy, values[:, start:start + responses.shape[1]]


class RewardModel(nn.Module):
    """A scalar score for a whole (prompt, response) sequence.

    The score is the mean over response positions of a per-position score, then an affine
    normalisation (``scale``, ``shift``) set after training so that SFT samples score about
    N(0, 1): the KL coefficient then means the same thing whatever scale training landed on.
    """

    def __init__(self, **sizes):
        super().__init__()
        self.backbone = TinyTransformer(**sizes)
        self.score_head = nn.Linear(self.backbone.token_embedding.embedding_dim, 1)
        self.register_buffer("scale", torch.tensor(1.0))
        self.register_buffer("shift", torch.tensor(0.0))

    def forward(self, sequences: torch.Tensor) -> torch.Tensor:
        hidden, _ = self.backbone(sequences)
        raw = self.score_head(hidden[:, PROMPT_LENGTH:]).squeeze(-1).mean(-1)
        return (raw - self.shift) / self.scale

    @torch.no_grad()
    def normalise_on(self, sequences: torch.Tensor) -> None:
        self.shift.zero_(), self.scale.fill_(1.0)
        scores = self(sequences)
        self.shift.copy_(scores.mean()), self.scale.copy_(scores.std())


def parameter_count(module: nn.Module) -> int:
    return sum(p.numel() for p in module.parameters())


__all__ = ["PolicyLM", "RewardModel", "TinyTransformer", "response_stats", "parameter_count",
           "PROMPT_LENGTH"]
