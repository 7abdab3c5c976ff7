"""Shared code for the RLHF course module.

The package holds what the notebooks and the graders share: notebook tooling, the nbgrader
extension and the course pipeline.  It never holds a reference implementation of the three
assignment functions nor a hidden test: those live in ``source/`` and ``instructor/``.
"""
from pathlib import Path

COURSE_ROOT = Path(__file__).resolve().parent.parent
ASSIGNMENT = "rlhf"
NOTEBOOK = "rlhf_building_blocks.ipynb"
STUDENT_FUNCTIONS = ("ppo_clipped_objective", "dpo_loss", "compute_gae")
