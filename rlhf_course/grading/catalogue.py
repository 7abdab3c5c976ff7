"""What an assignment's catalogue of answers is written with: ``instructor/<assignment>_catalogue.py`` (instructor
files, never released) holds ``WRONG_ANSWERS`` (:class:`WrongAnswer`), ``CORRECT_VARIANTS`` (:class:`CorrectVariant`)
and ``MISCONCEPTIONS`` (a :class:`Misconception` for each wrong answer, by name).

The suite grades every entry and requires a wrong answer to lose exactly its ``loses`` and a correct variant
nothing; the feedback names a wrong answer's misconception when a submission loses what it loses
(:mod:`rlhf_course.grading.misconceptions`)."""
from __future__ import annotations

from dataclasses import dataclass

from rlhf_course.grading.results import NamedMisconception
from rlhf_course.i18n import CHINESE, ENGLISH


@dataclass(frozen=True)
class WrongAnswer:
    """A realistic wrong answer: ``source`` (the whole answer cell, as a student writes it) replaces the answer cell
    whose nbgrader grade_id is ``answer_cell``; ``loses`` are the grade_ids of the grade cells that must score 0."""

    name: str
    answer_cell: str
    source: str
    loses: frozenset[str]


@dataclass(frozen=True)
class CorrectVariant:
    """A correct answer written in another style than the reference: it must get full marks."""

    name: str
    answer_cell: str
    source: str


@dataclass(frozen=True)
class Misconception:
    """What a catalogued wrong answer gets wrong, for the student: each text by language ("en", "zh-CN").
    ``section`` is the heading of the notebook section to re-read, as the edition of that language has it."""

    name: dict
    explanation: dict
    section: dict

    def named(self, entry: str, function: str, language: str) -> NamedMisconception:
        def say(texts: dict) -> str:
            return texts.get(language) or texts[ENGLISH]
        return NamedMisconception(entry, function, say(self.name), say(self.explanation), say(self.section))


def said(section: dict, english: tuple[str, str], chinese: tuple[str, str]) -> Misconception:
    """A misconception from its (name, explanation) in English and in Chinese; ``section`` by language."""
    return Misconception({ENGLISH: english[0], CHINESE: chinese[0]}, {ENGLISH: english[1], CHINESE: chinese[1]},
                         section)


def by_name(entries: list) -> dict:
    """Catalogue entries (each with a ``name``) by name; two entries of one name are an authoring slip."""
    named = {entry.name: entry for entry in entries}
    if len(named) != len(entries):
        twice = sorted({entry.name for entry in entries if sum(e.name == entry.name for e in entries) > 1})
        raise ValueError(f"catalogue entries named twice: {', '.join(twice)}")
    return named
