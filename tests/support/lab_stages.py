"""The lab's SFT policy and reward model shared by the tests of one run (the ``lab_stage_cache`` fixture's folder)."""
from __future__ import annotations

import fcntl
from pathlib import Path


def trained_once(folder: Path, config):
    """``shared_stages.sft_and_reward_model(config)`` with ``folder`` as its cache, under a lock per cache file: a test
    process that needs the same two models while another one trains them (the two workers of `make test`) waits for
    them and loads them, instead of training them a second time beside it (never longer than training them)."""
    import torch

    from rlhf_course.lab import shared_stages
    path = shared_stages.cache_file(config, torch.get_num_threads(), folder)
    with open(path.with_suffix(".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        return shared_stages.sft_and_reward_model(config, show_progress=False, folder=folder)
