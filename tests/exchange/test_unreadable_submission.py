"""A notebook Jupyter cannot read is not submitted: submit refuses it, says why and what to do, in the edition's
language, and the student's earlier submission stays the one graded (only the latest is; grading would score an
unreadable one 0 as a malformed notebook)."""
from rlhf_course import NOTEBOOK
from tests.support.command_session import OwnCommandSession
from tests.support.course import course_with_own_exchange

COURSE_ID = "rlhf-course"


def test_an_unreadable_notebook_is_refused_and_the_earlier_submission_kept(tmp_path, monkeypatch):
    course, exchange, home, env = course_with_own_exchange(tmp_path, monkeypatch, COURSE_ID)
    inbound = exchange / COURSE_ID / "inbound"
    with OwnCommandSession(home) as commands:
        for assignment in ("rlhf", "rlhf_zh"):
            commands.nbgrader("release_assignment", assignment, cwd=course)
        commands.nbgrader("fetch_assignment", "rlhf", "rlhf_zh", env=env)
        commands.nbgrader("submit", "rlhf", env=env)
        kept = sorted(p.name for p in inbound.iterdir())
        assert len(kept) == 1

        (home / "rlhf" / ".ipynb_checkpoints").mkdir(exist_ok=True)  # a broken checkpoint is not graded: no matter
        (home / "rlhf" / ".ipynb_checkpoints" / "scratch-checkpoint.ipynb").write_text("{")
        commands.nbgrader("submit", "rlhf", env=env)
        kept = sorted(p.name for p in inbound.iterdir())
        assert len(kept) == 2

        (home / "rlhf" / NOTEBOOK).write_text('{"cells": [{"cell_type": "code", "source": "x = 1"')  # cut short
        refused = commands.nbgrader("submit", "rlhf", env=env, check=False)
        said = refused.stdout + refused.stderr
        assert refused.returncode != 0, said
        assert f"{NOTEBOOK} was not submitted: Jupyter cannot read it" in said, said
        assert "Revert Notebook to Checkpoint" in said and "NotJSONError" in said
        assert sorted(p.name for p in inbound.iterdir()) == kept  # nothing new: the earlier one is graded

        (home / "rlhf_zh" / NOTEBOOK).write_text('{"nbformat": 4, "nbformat_minor": 5, "cells": "not a list"}')
        refused_zh = commands.nbgrader("submit", "rlhf_zh", env=env, check=False)
        said_zh = refused_zh.stdout + refused_zh.stderr
        assert refused_zh.returncode != 0 and f"{NOTEBOOK} 未提交：Jupyter 无法读取它" in said_zh, said_zh
        assert sorted(p.name for p in inbound.iterdir()) == kept
