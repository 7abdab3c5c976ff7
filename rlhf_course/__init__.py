"""Shared code for the RLHF course module.

The package holds what the notebooks and the graders share, a folder for each concern: ``lab/`` (the tiny
LM and the labs' entry points), ``grading/`` (the course's grading on nbgrader: ``python -m rlhf_course.grading``),
``exchange/`` (nbgrader's exchange, made strict), ``classroom/`` (the course on a JupyterHub: ``make hub``), and
beside them what the notebooks import (``explorers``, ``i18n``, ``floating_point``).  It never holds a reference
implementation of the three assignment functions nor a hidden test: those live in ``source/`` and ``instructor/``.
"""
from pathlib import Path

COURSE_ROOT = Path(__file__).resolve().parent.parent
ASSIGNMENT = "rlhf"
NOTEBOOK = "rlhf_building_blocks.ipynb"
STUDENT_FUNCTIONS = ("ppo_clipped_objective", "dpo_loss", "compute_gae")
# What a course directory is made of, as an instructor copies it elsewhere (the hub's course copy, the tests'):
# everything else in it is generated from these (release/, the gradebook) or written by grading.
COURSE_FILES = ("source", "instructor", "i18n", "nbgrader_config.py", "jupyter")


def copy_course_files(destination: Path, source: Path = COURSE_ROOT) -> Path:
    """Copy a course's inputs (:data:`COURSE_FILES`) from ``source`` into ``destination`` (made if missing; files
    already there are overwritten, others left), without byte-code caches; ``destination``."""
    import shutil
    destination.mkdir(parents=True, exist_ok=True)
    for name in COURSE_FILES:
        if (source / name).is_dir():
            shutil.copytree(source / name, destination / name, dirs_exist_ok=True,
                            ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        else:
            shutil.copy2(source / name, destination / name)
    return destination
