"""The exact KL-regularised optimum for a bigram reference, against brute-force enumeration."""
import itertools

import numpy as np
import pytest
import torch

from rlhf_course.lab import exact_optimum as eo
from rlhf_course.lab import language


def brute_force(reference: eo.MarkovReference, rewards: np.ndarray, beta: float):
    """Every response enumerated: per context log Z, E_{pi*}[r], KL(pi* || pi_ref)."""
    vocab, length = reference.transition.shape[0], reference.length
    log_z, reward, kl = [], [], []
    responses = list(itertools.product(range(vocab), repeat=length))
    for context in range(vocab):
        log_p, r = [], []
        for y in responses:
            path = (context,) + y
            log_p.append(sum(np.log(reference.transition[a, b]) for a, b in zip(path, path[1:])))
            r.append(sum(rewards[t][path[t], path[t + 1]] for t in range(length)))
        log_p, r = np.array(log_p), np.array(r)
        log_weights = log_p + r / beta
        lz = np.log(np.sum(np.exp(log_weights - log_weights.max()))) + log_weights.max()
        p_star = np.exp(log_weights - lz)
        log_z.append(lz)
        reward.append(p_star @ r)
        kl.append(p_star @ (np.log(p_star) - log_p))
    return np.array(log_z), np.array(reward), np.array(kl)


def random_problem(vocab=3, length=4, seed=0):
    rng = np.random.default_rng(seed)
    transition = rng.dirichlet(np.ones(vocab), size=vocab)
    reference = eo.MarkovReference(transition, rng.dirichlet(np.ones(vocab)), length)
    rewards = rng.normal(size=(length, vocab, vocab))
    return reference, rewards


@pytest.mark.parametrize("beta", [0.05, 0.3, 1.0, 7.0])
@pytest.mark.parametrize("seed", [0, 1])
def test_recursion_matches_enumeration_general_rewards(beta, seed):
    reference, rewards = random_problem(vocab=3, length=4, seed=seed)
    exact = eo.solve(reference, rewards, beta)
    log_z, reward, kl = brute_force(reference, rewards, beta)
    np.testing.assert_allclose(exact.log_z, log_z, rtol=0, atol=1e-9)
    np.testing.assert_allclose(exact.reward, reward, rtol=0, atol=1e-9)
    np.testing.assert_allclose(exact.kl, kl, rtol=0, atol=1e-9)
    assert exact.mean_kl == pytest.approx(reference.context_probs @ kl, abs=1e-9)


@pytest.mark.parametrize("beta", [0.02, 0.1, 1.0])
def test_recursion_matches_enumeration_gold_reward(beta):
    """The gold reward's form (sentiment per word, repeat penalty from the second word on), 4 words."""
    sentiment = np.array([1.0, -1.0, 0.0, 1.0])
    rewards = eo.gold_step_rewards(vocab_size=4, length=4, sentiment=sentiment)
    rng = np.random.default_rng(3)
    reference = eo.MarkovReference(rng.dirichlet(np.ones(4), size=4), rng.dirichlet(np.ones(4)), 4)
    exact = eo.solve(reference, rewards, beta)
    log_z, reward, kl = brute_force(reference, rewards, beta)
    np.testing.assert_allclose(exact.log_z, log_z, rtol=0, atol=1e-9)
    np.testing.assert_allclose(exact.reward, reward, rtol=0, atol=1e-9)
    np.testing.assert_allclose(exact.kl, kl, rtol=0, atol=1e-9)
    # Identity at the optimum: KL = E[r]/beta - log Z.
    np.testing.assert_allclose(exact.kl, exact.reward / beta - exact.log_z, rtol=0, atol=1e-9)


def test_gold_step_rewards_match_the_language():
    generator = torch.Generator().manual_seed(0)
    responses = torch.randint(0, language.VOCAB_SIZE, (200, language.RESPONSE_LENGTH), generator=generator)
    responses[:50, 3] = responses[:50, 2]  # some repeats
    prompts = torch.randint(0, language.VOCAB_SIZE, (200, 3), generator=generator)
    prompts[:20, -1] = responses[:20, 0]   # a prompt word followed by itself is not a repeat
    rewards = eo.gold_step_rewards()
    path = torch.cat([prompts[:, -1:], responses], 1).numpy()
    ours = sum(rewards[t][path[:, t], path[:, t + 1]] for t in range(language.RESPONSE_LENGTH))
    np.testing.assert_allclose(ours, language.gold_reward(responses).double().numpy(), atol=1e-12)


def test_limits_of_beta_and_the_frontier_bound():
    reference, rewards = random_problem(vocab=3, length=4, seed=2)
    at_inf = eo.solve(reference, rewards, np.inf)
    assert at_inf.mean_kl == pytest.approx(0.0, abs=1e-12)
    curve = eo.frontier(reference, rewards)
    assert np.all(np.diff(curve.kl) <= 1e-12) and np.all(np.diff(curve.reward) <= 1e-12)  # both fall with beta
    # The best response, by enumeration, is the beta -> 0 limit and the bound at large KL.
    best = sum(w * max(sum(rewards[t][((c,) + y)[t], ((c,) + y)[t + 1]] for t in range(4))
                       for y in itertools.product(range(3), repeat=4))
               for c, w in enumerate(reference.context_probs))
    assert curve.max_reward == pytest.approx(best, abs=1e-12)
    assert curve.reward[0] == pytest.approx(best, abs=1e-2)
    assert curve.best_reward_at(1e6)[0] == pytest.approx(best, abs=1e-12)
    # The duality bound is tight at the curve's own points (up to the grid) and bounds random policies.
    assert np.allclose(curve.best_reward_at(curve.kl[::40]), curve.reward[::40], atol=1e-3)
    rng = np.random.default_rng(0)
    vocab, length = 3, 4
    for _ in range(20):
        other = eo.MarkovReference(rng.dirichlet(np.ones(vocab), size=vocab), reference.context_probs, length)
        # E_other[r] and KL(other || ref) by enumeration
        responses = list(itertools.product(range(vocab), repeat=length))
        r_mean = kl_mean = 0.0
        for c, w in enumerate(reference.context_probs):
            for y in responses:
                path = (c,) + y
                p = np.prod([other.transition[a, b] for a, b in zip(path, path[1:])])
                q = np.prod([reference.transition[a, b] for a, b in zip(path, path[1:])])
                r_mean += w * p * sum(rewards[t][path[t], path[t + 1]] for t in range(length))
                kl_mean += w * p * np.log(p / q)
        assert r_mean <= curve.best_reward_at(kl_mean)[0] + 1e-9


def test_prompt_context_probs_match_sampling():
    prompts = language.sample_prompts(60_000, torch.Generator().manual_seed(0))
    freq = np.bincount(prompts[:, -1].numpy(), minlength=language.VOCAB_SIZE) / len(prompts)
    np.testing.assert_allclose(freq, eo.prompt_context_probs(), atol=0.005)


def test_residual_policy_starts_as_the_bigram():
    from rlhf_course.lab.model import PolicyLM, response_stats
    generator = torch.Generator().manual_seed(0)
    transition = eo.fit_bigram(language.sample_corpus(500, generator))
    torch.manual_seed(0)
    policy = eo.BigramResidualPolicy(transition, backbone_from=PolicyLM()).eval()
    prompts = language.sample_prompts(64, generator)
    responses = policy.sample(prompts, language.RESPONSE_LENGTH, generator)
    log_probs, _, _ = response_stats(policy, prompts, responses)
    path = torch.cat([prompts[:, -1:], responses], 1)
    expected = torch.log(torch.as_tensor(transition, dtype=torch.float32))[path[:, :-1], path[:, 1:]]
    torch.testing.assert_close(log_probs, expected, atol=1e-5, rtol=0)
