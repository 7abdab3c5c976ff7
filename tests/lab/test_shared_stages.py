"""The SFT policy and reward model trained once per machine (RLHF_LAB_CACHE, issue #37): a lab that loads them
from the cache gives exactly the numbers of one that trains them (every metric, sample and report value), in
the PPO/DPO lab and in GRPO; the cache is keyed by the settings and thread count; an unreadable file is trained
over.  The smoke setting: about 3 s."""
import dataclasses

import pytest
import torch

from rlhf_course import ASSIGNMENT, NOTEBOOK, STUDENT_FUNCTIONS
from rlhf_course.lab import grpo, ppo_dpo, shared_stages, train
from rlhf_course.lab.notebook_functions import functions_from_notebook


@pytest.fixture(scope="module")
def functions(repo):
    return functions_from_notebook(repo / "source" / ASSIGNMENT / NOTEBOOK, STUDENT_FUNCTIONS)


@pytest.fixture(scope="module")
def grpo_functions(repo, functions):
    """GRPO's three: the solutions of the three source notebooks."""
    return {**functions_from_notebook(repo / "source" / "grpo" / "grpo.ipynb", ("group_relative_advantages",)),
            **functions_from_notebook(repo / "source" / "kl_penalty" / "kl_penalty.ipynb", ("kl_estimator_k3",)),
            "ppo_clipped_objective": functions["ppo_clipped_objective"]}


def numbers(result) -> dict:
    """Everything a PPO/DPO lab run reports, but its timings."""
    return {"report": dataclasses.astuple(result.reward_model)[:2], "ppo": result.ppo_history,
            "samples": result.ppo_samples, "dpo": result.dpo_history}


def no_training(*args, **kwargs):
    raise AssertionError("trained, not loaded from the cache")


def run(functions, monkeypatch, cache=None):
    if cache is None:
        monkeypatch.delenv(shared_stages.CACHE_VARIABLE, raising=False)
    else:
        monkeypatch.setenv(shared_stages.CACHE_VARIABLE, str(cache))
    return ppo_dpo.run_demo(**functions, setting="smoke", show_progress=False, threads=1)


def test_loaded_stages_give_the_trained_numbers(functions, grpo_functions, monkeypatch, tmp_path):
    trained = run(functions, monkeypatch)
    first = run(functions, monkeypatch, tmp_path)  # trains, writes the cache
    [written] = list(tmp_path.iterdir())
    trains = shared_stages._train
    monkeypatch.setattr(shared_stages, "_train", no_training)
    loaded = run(functions, monkeypatch, tmp_path)  # reads it
    assert written.stat().st_mode & 0o777 == 0o644  # every user of the machine reads it
    assert numbers(loaded) == numbers(first) == numbers(trained)
    assert len(list(tmp_path.iterdir())) == 1

    # GRPO starts from the same two stages: the same numbers loaded or trained
    monkeypatch.setenv(shared_stages.CACHE_VARIABLE, str(tmp_path))
    kwargs = dict(setting="smoke", show_progress=False, threads=1)
    grpo_loaded = grpo.run_lab(**grpo_functions, **kwargs)
    assert len(list(tmp_path.iterdir())) == 1  # the PPO lab's file
    monkeypatch.setattr(shared_stages, "_train", trains)
    monkeypatch.delenv(shared_stages.CACHE_VARIABLE)
    grpo_trained = grpo.run_lab(**grpo_functions, **kwargs)
    assert (grpo_loaded.history, grpo_loaded.samples) == (grpo_trained.history, grpo_trained.samples)


def test_the_key_names_settings_and_threads_and_a_bad_file_is_trained_over(monkeypatch, tmp_path):
    smoke = train.LabConfig.setting("smoke")
    names = {shared_stages.cache_file(smoke, 1, tmp_path), shared_stages.cache_file(smoke, 2, tmp_path),
             shared_stages.cache_file(dataclasses.replace(smoke, seed=1), 1, tmp_path),
             shared_stages.cache_file(dataclasses.replace(smoke, rm_steps=6), 1, tmp_path)}
    assert len(names) == 4
    # PPO's settings are the student's run, not the shared stages': the same file
    assert shared_stages.cache_file(dataclasses.replace(smoke, ppo_iterations=9), 1, tmp_path) in names
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    path = shared_stages.cache_file(smoke, 1, tmp_path)
    path.write_bytes(b"not a torch file")
    stages = shared_stages.sft_and_reward_model(smoke, show_progress=False, folder=tmp_path)
    assert not stages.loaded
    again = shared_stages.sft_and_reward_model(smoke, show_progress=False, folder=tmp_path)  # rewritten
    torch.set_num_threads(threads)
    assert again.loaded and again.report.heldout_accuracy == stages.report.heldout_accuracy
