import torch

from rlhf_course.lab import language
from rlhf_course.lab.model import PolicyLM, RewardModel, parameter_count, response_stats


def ids(*words):
    return torch.tensor([[language.WORDS.index(w) for w in words]])


def test_gold_reward_counts_sentiment_and_repeats():
    mixed = ids("good", "great", "the", "bad", "a", "dog", "cat", "day", "park", "fun")
    assert abs(language.gold_reward(mixed).item() - (3 - 1) / 10) < 1e-6
    assert abs(language.gold_reward(ids(*["love"] * 10)).item() - (10 - 9) / 10) < 1e-6


def test_corpus_is_readable_and_has_no_repeats():
    corpus = language.sample_corpus(500, torch.Generator().manual_seed(0))
    assert corpus.shape == (500, language.SEQUENCE_LENGTH)
    assert (corpus[:, 1:] != corpus[:, :-1]).all()
    assert len(language.decode(corpus[0]).split()) == language.SEQUENCE_LENGTH
    gold = language.gold_reward(corpus[:, language.PROMPT_LENGTH:])
    assert gold.min() < -0.3 and gold.max() > 0.3  # spans bad to good


def test_kv_cache_sampling_matches_full_forward():
    torch.manual_seed(0)
    policy = PolicyLM().eval()
    prompts = language.sample_prompts(8, torch.Generator().manual_seed(1))
    responses = policy.sample(prompts, language.RESPONSE_LENGTH, torch.Generator().manual_seed(2))
    # Replaying the sampler's choices against the full (uncached) forward gives the same distributions.
    with torch.no_grad():
        hidden, cache = policy.backbone(prompts)
        cached = [torch.log_softmax(policy.lm_head(hidden[:, -1]), -1)]
        for step in range(language.RESPONSE_LENGTH - 1):
            hidden, cache = policy.backbone(responses[:, step:step + 1], cache, start=prompts.shape[1] + step)
            cached.append(torch.log_softmax(policy.lm_head(hidden[:, -1]), -1))
        cached = torch.stack(cached, 1).gather(-1, responses.unsqueeze(-1)).squeeze(-1)
        full, _, _ = response_stats(policy, prompts, responses)
    torch.testing.assert_close(cached, full, atol=1e-5, rtol=1e-5)


def test_sizes_and_reward_model_normalisation():
    assert 50_000 < parameter_count(PolicyLM()) < 150_000
    model = RewardModel()
    sequences = language.sample_corpus(64, torch.Generator().manual_seed(3))
    model.normalise_on(sequences)
    scores = model(sequences)
    assert abs(scores.mean().item()) < 1e-4 and abs(scores.std().item() - 1) < 1e-4
