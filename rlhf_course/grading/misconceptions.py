"""Feedback that names the misconception: when what a submission got wrong is exactly what one
catalogued wrong answer gets wrong, its feedback page says which mistake that looks like, why it is
wrong and which section of the notebook to re-read, in the student's language.

The catalogue is the instructor's (``instructor/<base>_catalogue.py``, written with
:mod:`rlhf_course.grading.catalogue`; never released): its ``WRONG_ANSWERS`` (each with its source and
the grade cells it ``loses``) and its ``MISCONCEPTIONS``, a
:class:`~rlhf_course.grading.catalogue.Misconception` for each by name.

**The rule.**  Nothing is named unless the submission was scored (state ``graded`` or ``failed
tests``: one that timed out, crashed, ran out of memory, was malformed or too large, or met a grader
error names nothing: its zeros say nothing about a misconception) and
``c.TrustedGrading.name_misconceptions`` is on (the default).  Then, for each function the
notebook's checks call (each check names its function, so the checks say which grade cells belong
to which answer cell):

1. the *lost set* is the grade cells of that function's checks that scored less than their points;
   an empty lost set names nothing;
2. the *candidates* are the catalogued wrong answers whose ``loses`` EQUALS the lost set (one cell
   more or fewer is no match);
3. a candidate stays only if, in every lost cell, the instructor's message (the property and what
   went wrong with its values, in the student's language; the student's line has no values) is the one
   the catalogued answer itself gets from that check: the same words, and the same numbers to 4
   significant digits (the numbers are values the function returned on the check's seeded inputs, and
   the expected ones, so this is deterministic).  The catalogued answer
   is run through the same checks here, in the grader's process (it is the instructor's code);
4. exactly one candidate left: it is named; none, or two or more: nothing is named for that function.

Step 3 is what tells apart two catalogued answers that lose the same cells (GRPO's eps inside the
square root and eps ignored; KL's k1 and the mean over tokens, ...), and what keeps a different
mistake that happens to lose the same cells (log-sigmoid of the swapped margin loses exactly the
cells of "beta left out") from being given another mistake's name.  Several functions may each name
one.  What is named is plain data on the result
(:class:`~rlhf_course.grading.results.NamedMisconception`, in the student's language), so it travels
from a Dask worker with the rest of the result; the feedback page shows it under the scores
(:func:`misconception_lines`).  Nothing of a hidden test reaches it: the sentences are the
catalogue's own fixed text.
"""
from __future__ import annotations

import math
import re
import threading
from typing import Callable

from rlhf_course.course.settings import Course
from rlhf_course.grading.results import SCORED_STATES, NamedMisconception, SubmissionResult, one_line
from rlhf_course.i18n import t

INSTRUCTOR_FOLDER = "instructor"
RELATIVE_TOLERANCE = 1e-4  # numbers in two messages agree to 4 significant digits


def catalogue_module_name(base: str) -> str:
    """``instructor/<this>.py`` holds the wrong answers of the assignment written in ``source/<base>/``."""
    return f"{base}_catalogue"


# ----------------------------------------------------------------------------- the catalogue

_LOCK = threading.Lock()
_CATALOGUES: dict = {}
_MESSAGES: dict = {}


def catalogue(course: Course, base: str) -> tuple[list, dict] | None:
    """(WRONG_ANSWERS, MISCONCEPTIONS) of the assignment ``base``, or None when it has no catalogue.
    Loaded once per version of the files (the grader's threads share it)."""
    from rlhf_course.grading import instructor

    folder = course.root / INSTRUCTOR_FOLDER
    name = catalogue_module_name(base)
    path = folder / f"{name}.py"
    if not path.is_file():
        return None
    key = (str(path), path.stat().st_mtime_ns)
    with _LOCK:
        if key not in _CATALOGUES:
            module = instructor.load_module(course, name)
            _CATALOGUES[key] = (list(module.WRONG_ANSWERS), dict(getattr(module, "MISCONCEPTIONS", {})))
        return _CATALOGUES[key]


def messages_of(wrong, checks: dict, function: str, language: str) -> dict[str, str]:
    """What each of ``function``'s checks says of the catalogued answer ``wrong`` (grade id -> message, as the
    trusted grader writes it), run in this process with the notebook's set-up names (torch, F, math)."""
    import torch
    import torch.nn.functional as F

    from rlhf_course.grading.checks import evaluate
    from rlhf_course.grading.results import failed_message
    from rlhf_course.i18n import speaking

    namespace = {"torch": torch, "F": F, "math": math}
    exec(compile(wrong.source, f"<catalogue: {wrong.name}>", "exec"), namespace)
    answer = namespace[function]
    messages = {}
    with speaking(language), torch.random.fork_rng():
        for gid, check in checks.items():
            if check.function == function:
                detail = evaluate(check, answer)
                messages[gid] = check.message if detail is None else failed_message(check.message, detail, language)
    return messages


def _cached_messages(wrong, checks: dict, function: str, language: str) -> dict[str, str]:
    """:func:`messages_of`, once per catalogued answer, function, language and version of its checks' messages."""
    key = (wrong.source, function, language,
           tuple((gid, check.message) for gid, check in checks.items() if check.function == function))
    with _LOCK:
        if key not in _MESSAGES:
            _MESSAGES[key] = messages_of(wrong, checks, function, language)
        return _MESSAGES[key]


_NUMBER = re.compile(r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?|\b(?:nan|inf)\b")


def same_message(got: str, expected: str) -> bool:
    """The same words, and the same numbers to :data:`RELATIVE_TOLERANCE`."""
    if _NUMBER.sub("#", got) != _NUMBER.sub("#", expected):
        return False
    for a, b in zip(_NUMBER.findall(got), _NUMBER.findall(expected)):
        x, y = float(a), float(b)
        if not (x == y or (math.isnan(x) and math.isnan(y))
                or abs(x - y) <= RELATIVE_TOLERANCE * max(abs(x), abs(y))):
            return False
    return True


# ----------------------------------------------------------------------------- matching

def match(result: SubmissionResult, checks: dict, wrong_answers: list, misconceptions: dict,
          messages: Callable[[object, str], dict[str, str]]) -> list[NamedMisconception]:
    """The misconceptions the rule (module docstring) names for ``result``, graded by ``checks`` (grade id ->
    Check, messages in the result's language); ``messages(wrong, function)``: what those checks say of a
    catalogued answer (:func:`messages_of`)."""
    if result.state not in SCORED_STATES:
        return []
    failed = {gid for gid, cell in result.cells.items() if cell.score < cell.points}
    named = []
    for function in dict.fromkeys(check.function for check in checks.values()):
        cells = {gid for gid, check in checks.items() if check.function == function and gid in result.cells}
        lost = failed & cells
        if not lost:
            continue
        candidates = [w for w in wrong_answers if set(w.loses) == lost and w.name in misconceptions]
        candidates = [w for w in candidates
                      if all(same_message(result.cells[gid].instructor_message, messages(w, function).get(gid, ""))
                             for gid in lost)]
        if len(candidates) == 1:
            named.append(misconceptions[candidates[0].name].named(candidates[0].name, function, result.language))
    return named


def name_misconceptions(result: SubmissionResult, course: Course, base: str, checks: dict) -> list[NamedMisconception]:
    """What :func:`match` names for a result of the assignment written in ``source/<base>/`` ([] when it has no
    catalogue); ``checks``: the assignment's, with their messages in the result's language."""
    found = catalogue(course, base)
    if found is None or result.state not in SCORED_STATES:
        return []
    wrong_answers, misconceptions = found
    return match(result, checks, wrong_answers, misconceptions,
                 lambda wrong, function: _cached_messages(wrong, checks, function, result.language))


# ----------------------------------------------------------------------------- the feedback page

_TEX = {r"\epsilon": "ε", r"\varepsilon": "ε", r"\beta": "β", r"\lambda": "λ", r"\gamma": "γ"}


def plain_heading(heading: str) -> str:
    """A notebook heading as plain text (its inline TeX, ``$k_3$``, ``$\\epsilon$``, written out)."""
    def plain(match: re.Match) -> str:
        body = match.group(1)
        for tex, letter in _TEX.items():
            body = body.replace(tex, letter)
        return re.sub(r"_\{?([0-9A-Za-z]+)\}?", r"\1", body)
    return re.sub(r"\$([^$]*)\$", plain, heading)


def misconception_lines(result: SubmissionResult) -> list[str]:
    """One sentence per named misconception, in the student's language, for the feedback page's head under the
    scores (plain text: the feedback template escapes it)."""
    return [t("This looks like: {name} - {explanation} (see {section})", result.language,
              name=one_line(m.name), explanation=one_line(m.explanation), section=one_line(plain_heading(m.section)))
            for m in result.misconceptions]
