"""A toy "sentiment" language with a known gold reward.

24 readable words: 8 positive, 8 negative, 8 neutral.  A sequence is a 3-word prompt followed
by a 10-word response.  The gold reward of a response is

    gold_reward = (#positive - #negative - #adjacent repeats) / 10

The corpus the SFT policy learns from almost never repeats a word, so a reward model trained on
SFT samples rarely sees the repeat penalty: pushing hard on it shows reward hacking.
"""
from __future__ import annotations

import torch

POSITIVE = ("good", "great", "happy", "love", "nice", "fun", "kind", "bright")
NEGATIVE = ("bad", "sad", "hate", "awful", "angry", "dull", "cruel", "dark")
NEUTRAL = ("the", "a", "cat", "dog", "day", "park", "food", "movie")
WORDS = POSITIVE + NEGATIVE + NEUTRAL
VOCAB_SIZE = len(WORDS)
PROMPT_LENGTH = 3
RESPONSE_LENGTH = 10
SEQUENCE_LENGTH = PROMPT_LENGTH + RESPONSE_LENGTH

_POS_IDS = torch.arange(0, 8)
_NEG_IDS = torch.arange(8, 16)
_NEUTRAL_IDS = torch.arange(16, 24)
_SENTIMENT = torch.cat([torch.ones(8), -torch.ones(8), torch.zeros(8)])  # +1, -1, 0 per token id


def decode(tokens: torch.Tensor) -> str:
    """Token ids (1-D) as words."""
    return " ".join(WORDS[int(t)] for t in tokens)


def gold_reward(responses: torch.Tensor) -> torch.Tensor:
    """The true reward of responses, shape (B, RESPONSE_LENGTH) of token ids -> (B,) float."""
    sentiment = _SENTIMENT[responses].sum(dim=-1)
    repeats = (responses[:, 1:] == responses[:, :-1]).sum(dim=-1)
    return (sentiment - repeats) / 10.0


def has_adjacent_repeat(responses: torch.Tensor) -> torch.Tensor:
    """(B, T) token ids -> (B,) bool: does a word follow itself anywhere?"""
    return (responses[:, 1:] == responses[:, :-1]).any(dim=-1)


def sample_corpus(count: int, generator: torch.Generator) -> torch.Tensor:
    """Human-like text for supervised training, shape (count, SEQUENCE_LENGTH).

    Each sequence has a mood: the chance that a word is positive rather than negative is drawn
    per sequence, so the corpus spans gold rewards from clearly negative to clearly positive.
    About 40% of words are neutral.  Adjacent repeats are re-drawn (rare, as in real text).
    """
    mood = torch.rand(count, 1, generator=generator)  # P(positive | sentiment word)
    kind = torch.rand(count, SEQUENCE_LENGTH, generator=generator)
    is_neutral = kind < 0.4
    is_positive = (~is_neutral) & (torch.rand(count, SEQUENCE_LENGTH, generator=generator) < mood)
    choice = torch.randint(0, 8, (count, SEQUENCE_LENGTH), generator=generator)
    tokens = torch.where(is_neutral, _NEUTRAL_IDS[choice],
                         torch.where(is_positive, _POS_IDS[choice], _NEG_IDS[choice]))
    for position in range(1, SEQUENCE_LENGTH):
        same = tokens[:, position] == tokens[:, position - 1]
        if same.any():  # shift to the next word of the same group: never a repeat
            group_start = (tokens[same, position] // 8) * 8
            tokens[same, position] = group_start + (tokens[same, position] - group_start + 1) % 8
    return tokens


def sample_prompts(count: int, generator: torch.Generator) -> torch.Tensor:
    """Prompts drawn from the corpus distribution, shape (count, PROMPT_LENGTH)."""
    return sample_corpus(count, generator)[:, :PROMPT_LENGTH]
