"""The lab's first two stages, the SFT policy and the reward model, computed once per machine.

They depend on the lab's code, its setting, its seed and torch (its version and thread count change the
last bits), never on the student's functions: a class of forty trained the same two models forty times
(issue #37).  With ``RLHF_LAB_CACHE`` set to a folder, the labs load them from a file there, named by a
key of all of the above, and go on exactly as if they had trained them: the same models, the same report,
the random generators where training left them (tests/lab/test_shared_stages.py compares every number).
Nothing is downloaded: a missing file is trained here, and written only where this process may write
(`make hub` fills a folder of root's that students read; a student never writes what another loads).
Files are read with ``torch.load(weights_only=True)``: tensors and numbers, never code.
"""
from __future__ import annotations

import contextlib
import hashlib
import inspect
import os
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path

import torch

from rlhf_course.lab import language, model, train

CACHE_VARIABLE = "RLHF_LAB_CACHE"
FORMAT = 1  # of the file; a change names every file anew


@dataclass
class SharedStages:
    sft: model.PolicyLM
    reward_model: model.RewardModel
    report: train.RewardModelReport
    generator: torch.Generator  # where the two stages left it: PPO and DPO draw on from there
    loaded: bool  # read from the cache, not trained here


def stage_config(config: train.LabConfig) -> dict:
    """The settings the two stages read (the seed, SFT's and the reward model's)."""
    return {k: v for k, v in asdict(config).items() if k == "seed" or k.startswith(("sft_", "rm_"))}


def cache_key(config: train.LabConfig, threads: int) -> str:
    """Names what the two stages' numbers depend on: their code, settings, torch and its thread count."""
    digest = hashlib.sha256(f"format {FORMAT}; torch {torch.__version__}; threads {threads}; "
                            f"{sorted(stage_config(config).items())}".encode())
    for module in (language, model, train):
        digest.update(inspect.getsource(module).encode())
    return digest.hexdigest()[:32]


def cache_file(config: train.LabConfig, threads: int, folder: str | Path | None = None) -> Path | None:
    folder = folder if folder is not None else os.environ.get(CACHE_VARIABLE)
    return Path(folder) / f"sft-and-reward-model-{cache_key(config, threads)}.pt" if folder else None


def _train(config: train.LabConfig, show_progress: bool) -> SharedStages:
    torch.manual_seed(config.seed)
    generator = torch.Generator().manual_seed(config.seed)
    sft = train.train_sft(config, generator, show_progress)
    reward_model, report = train.train_reward_model(sft, config, generator, show_progress)
    return SharedStages(sft, reward_model, report, generator, loaded=False)


def _state(stages: SharedStages) -> dict:
    pairs = stages.report.training_pairs
    return {"sft": stages.sft.state_dict(), "reward_model": stages.reward_model.state_dict(),
            "heldout_accuracy": stages.report.heldout_accuracy, "train_accuracy": stages.report.train_accuracy,
            "pairs": {"prompts": pairs.prompts, "chosen": pairs.chosen, "rejected": pairs.rejected},
            "generator": stages.generator.get_state(), "global_generator": torch.get_rng_state()}


def _from_state(state: dict) -> SharedStages:
    sft = model.PolicyLM()
    sft.load_state_dict(state["sft"])
    reward_model = model.RewardModel()
    reward_model.load_state_dict(state["reward_model"])
    reward_model.eval()
    for p in reward_model.parameters():
        p.requires_grad_(False)
    pairs = train.PreferencePairs(**state["pairs"])
    report = train.RewardModelReport(state["heldout_accuracy"], state["train_accuracy"], training_pairs=pairs)
    generator = torch.Generator()
    generator.set_state(state["generator"])
    torch.set_rng_state(state["global_generator"])
    return SharedStages(sft.eval(), reward_model, report, generator, loaded=True)


def _write(path: Path, stages: SharedStages) -> None:
    """Atomically (a reader sees the whole file or none), readable by every user; quietly nothing where this
    process may not write."""
    with contextlib.suppress(OSError):
        path.parent.mkdir(parents=True, exist_ok=True)
        descriptor, partial = tempfile.mkstemp(dir=path.parent, prefix=".partial-")
        try:
            with os.fdopen(descriptor, "wb") as out:
                torch.save(_state(stages), out)
            os.chmod(partial, 0o644)
            os.replace(partial, path)
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(partial)


def sft_and_reward_model(config: train.LabConfig, show_progress: bool = True,
                         folder: str | Path | None = None) -> SharedStages:
    """The SFT policy and the reward model for ``config`` with torch's current thread count: from the cache
    (``folder``, else ``RLHF_LAB_CACHE``; none: always trained), else trained here (and cached where
    allowed).  Either way torch's and the returned generator's random state are where training leaves them."""
    path = cache_file(config, torch.get_num_threads(), folder)
    if path is not None and path.is_file():
        try:
            return _from_state(torch.load(path, weights_only=True))
        except Exception:  # noqa: BLE001 (a truncated or foreign file: train instead, as without a cache)
            pass
    stages = _train(config, show_progress)
    if path is not None:
        _write(path, stages)
    return stages


def main(argv: list[str] | None = None) -> int:
    """``python -m rlhf_course.lab.shared_stages FOLDER --threads N [--setting quick ...]``: fill the cache
    (`make hub` does, for its students' thread count)."""
    import argparse
    from rlhf_course.lab import SETTINGS

    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("folder", type=Path)
    parser.add_argument("--threads", type=int, required=True, help="the thread count the labs will train with")
    parser.add_argument("--setting", nargs="+", default=["quick"], choices=SETTINGS)
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    for setting in args.setting:
        stages = sft_and_reward_model(train.LabConfig.setting(setting), show_progress=False, folder=args.folder)
        print(f"{setting}: {cache_file(train.LabConfig.setting(setting), args.threads, args.folder)} "
              f"({'already there' if stages.loaded else 'trained'})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
