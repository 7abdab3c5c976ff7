"""A notebook Jupyter cannot read is not submitted: submit refuses it, says why and what to do, in the edition's
language, and the student's earlier submission stays the one graded (only the latest is; grading would score an
unreadable one 0 as a malformed notebook).  In JupyterLab's Assignment List the refusal is that sentence alone,
wrapped to the dialog, not the server's traceback."""
import unicodedata

import pytest

from rlhf_course import NOTEBOOK, i18n
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


def _traceback_of(error: Exception) -> str:
    """nbgrader's Assignment List answer of a failed Submit: ``traceback.format_exc()`` of what submit raised."""
    import traceback
    try:
        try:
            raise ValueError("the notebook's own error")
        except ValueError:
            raise error
    except Exception:
        return traceback.format_exc()


@pytest.mark.parametrize("language", [i18n.ENGLISH, i18n.CHINESE])
def test_the_assignment_list_shows_the_refusal_alone_wrapped_to_its_dialog(language):
    """The Assignment List's dialog shows the answer in an unwrapped <pre>: the sentence alone, in lines of at most
    80 columns (a CJK character is two), no word or file name split, no line opening on closing punctuation."""
    from nbgrader.exchange.abc.exchange import ExchangeError

    from rlhf_course.classroom.submit_refusal import _PlainRefusals, refusal, wrapped
    from rlhf_course.exchange.submit import UNREADABLE
    why = "NotJSONError: Notebook does not appear to be JSON: '{\"cells\": [{\"cell_type\": \"code\", \"sourc..."
    sentence = i18n.t(UNREADABLE, language, notebook=NOTEBOOK, why=why)
    failed = _traceback_of(ExchangeError(sentence))
    assert refusal(failed) == sentence
    assert refusal(_traceback_of(RuntimeError("disk full"))) is None  # not a refusal: the traceback stays

    class Manager:
        def submit_assignment(self, course_id, assignment_id):
            return {"success": False, "value": failed}
    shown = _PlainRefusals(Manager()).submit_assignment("rlhf-course", "rlhf")
    assert shown == {"success": False, "value": wrapped(sentence)} and "Traceback" not in shown["value"]
    lines = shown["value"].splitlines()
    widths = [sum(2 if unicodedata.east_asian_width(c) in "WF" else 1 for c in line) for line in lines]
    assert len(lines) > 2 and max(widths) <= 80, shown["value"]
    assert all(line and line[0] not in "，。、；：！？）,.;:!?)" for line in lines), lines
    joined = "".join(lines) if language == i18n.CHINESE else " ".join(lines)
    assert NOTEBOOK in shown["value"] and "Revert Notebook" in shown["value"]
    assert joined.replace(" ", "") == sentence.replace(" ", "")  # nothing lost, nothing added


def test_a_submit_that_succeeds_is_nbgraders_answer():
    from rlhf_course.classroom.submit_refusal import _PlainRefusals

    class Manager:
        def submit_assignment(self, course_id, assignment_id):
            return {"success": True}
    assert _PlainRefusals(Manager()).submit_assignment("rlhf-course", "rlhf") == {"success": True}
