"""A hidden case's note, as a student reads it in a failed check's line, names the regime the case tests (the side
of the clip range, a sign, a dtype, a shape, a setting such as eps or beta) and never the values of its tensors:
a note that spelled out a one-token case would give its whole input to every student who failed it, the same
hidden case every term.  The instructor's line keeps the values (the Formgrader, the report)."""
from __future__ import annotations

import re

import pytest
import torch

from rlhf_course import i18n
from rlhf_course.grading import instructor
from rlhf_course.grading.checks import Check, Finding, judge_observation, public_text
from rlhf_course.grading.sandbox.observe import Case, Observation
from tests.support.course import repo_course

ASSIGNMENTS = ("rlhf", "kl_penalty", "grpo")
NUMBER = re.compile(r"-?\d+(?:\.\d+)?(?:e[+-]?\d+)?")
CLIP_BOUNDS = re.compile(r"1 [-+] eps")  # the clip range's ends by name: words, not a value


def _significant_digits(number: str) -> int:
    digits = number.lstrip("-").split("e")[0].replace(".", "").lstrip("0")
    return len(digits)


def _told(note: str, tensor: torch.Tensor) -> set[str]:
    """The numbers of ``note`` that print an element of ``tensor``: exactly (as ``:g`` prints it: a chosen value
    such as 1000 or -1), or rounded to 3-5 significant digits or 3 decimals (a drawn value).  Zero and a
    number of one or two digits that is not exactly an element are a regime's words (A = 0, 64 tokens, 1e-3)."""
    values = tensor.detach().double().flatten().tolist()
    exact = {float(f"{v:g}") for v in values} - {0.0}
    rounded = {float(f"{v:{spec}}") for v in values for spec in (".3g", ".4g", ".5g", ".3f")} - {0.0}
    return {n for n in NUMBER.findall(CLIP_BOUNDS.sub("", note))
            if float(n) in exact or (_significant_digits(n) >= 3 and float(n) in rounded)}


def _public_note(note) -> str:
    return note.public if isinstance(note, Finding) else str(note)


def _hidden_cases(assignment: str):
    checks = instructor.load_module(repo_course(), instructor.checks_module_name(assignment)).CHECKS.values()
    return [(check.id, case) for check in checks if not check.visible for case in check.cases()]


@pytest.mark.parametrize("language", [i18n.ENGLISH, "zh-CN"])
@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_no_public_note_prints_a_value_of_its_case_s_tensors(assignment, language):
    with i18n.speaking(language):
        cases = _hidden_cases(assignment)
        told = {}
        for check_id, case in cases:
            for tensor in (a for a in case.args if isinstance(a, torch.Tensor)):
                if hits := _told(_public_note(case.note), tensor):
                    told.setdefault(check_id, set()).update(hits)
    assert sum(bool(case.note) for _, case in cases) >= 5  # the notes a student may read are there to judge
    assert told == {}, f"notes a student reads print their case's tensor values: {told}"


def test_a_one_token_case_tells_the_instructor_its_values_and_the_student_its_regime():
    ppo = {check_id: case for check_id, case in _hidden_cases("rlhf")}["ppo_negative_advantage_keeps_upside"]
    ratio, advantage = float(ppo.args[0]), float(ppo.args[1])
    assert f"{ratio:.4g}" in str(ppo.note) and f"{advantage:.3f}" in str(ppo.note)
    assert "r > 1 + eps" in ppo.note.public and "A < 0" in ppo.note.public


def test_a_failed_line_carries_the_note_s_public_part_only():
    note = Finding("one token, ratio=0.002723, A=0.537", "one token, r < 1 - eps, A > 0")
    check = Check("some_check", "f", "a property", lambda: [], lambda case, obs, recall: Finding("wrong", "wrong"))
    detail = judge_observation(check, Case((torch.ones(1),), note=note), Observation(value=torch.ones(())), None)
    assert "0.002723" in detail  # the instructor's line
    assert "0.002723" not in public_text(detail) and "r < 1 - eps" in public_text(detail)
