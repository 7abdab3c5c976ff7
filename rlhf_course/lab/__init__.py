"""The tiny-LM RLHF labs: a toy language with a gold reward, a tiny transformer, SFT, a reward
model, and PPO / DPO trainers that run on the student's own functions.

The labs' entry points (the notebooks' lab cells and ``python -m``): :mod:`ppo_dpo` (the PPO/DPO lab of the
first assignment), :mod:`grpo` (the GRPO lab) and :mod:`frontier` (the reward-hacking and reward-KL frontier
study); :mod:`notebook_functions` loads a completed notebook's functions for them.  Nothing here imports the
grader."""
import os

SETTINGS = ("quick", "full", "smoke")  # each lab's lengths (LabConfig.setting, GrpoConfig.setting)


def notebook_setting() -> str:
    """The length of a lab a notebook runs: ``RLHF_LAB_SETTING`` (quick, full or smoke), quick unless set.
    The one place that reads it (the PPO/DPO lab's and GRPO's notebook entry points call this)."""
    return os.environ.get("RLHF_LAB_SETTING") or "quick"
