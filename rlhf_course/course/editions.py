"""An assignment's language editions as the course knows them: one translation file per edition,
``i18n/<assignment>.<language>.json`` beside the course, naming its base assignment and its language
(:mod:`rlhf_course.grading.editions` builds, checks and grades them)."""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from rlhf_course.course.settings import Course

I18N_FOLDER = "i18n"


@dataclass(frozen=True)
class Edition:
    """``assignment`` (e.g. rlhf_zh) is ``base`` (rlhf) in ``language`` (zh-CN), from ``path``."""

    assignment: str
    base: str
    language: str
    path: Path
    # A companion notebook's edition: the English notebook, relative to the course root (None: an assignment's)
    notebook: str | None = None

    def table(self) -> dict:
        return json.loads(self.path.read_text(encoding="utf-8"))

    @property
    def source_description(self) -> str:
        """Where the English comes from, as the messages name it."""
        return self.notebook if self.notebook else f"source/{self.base}"

    def english_notebooks(self, course: Course) -> list[Path]:
        """The English notebooks the edition translates."""
        if self.notebook:
            return [course.root / self.notebook]
        return sorted(source_folder(course, self.base).glob("*.ipynb"))

    def edition_notebook(self, course: Course, english: Path) -> Path:
        """Where the edition of one English notebook is written: the source directory's <assignment>/ for
        an assignment, beside the English notebook (named after the edition) for a companion notebook."""
        if self.notebook:
            return english.with_name(f"{self.assignment}.ipynb")
        return source_folder(course, self.assignment) / english.name


def all_editions(course: Course) -> list[Edition]:
    """Every translation file's edition: the assignments' and the companion notebooks'."""
    found = []
    for path in sorted((course.root / I18N_FOLDER).glob("*.json")):
        if path.name.startswith("glossary."):
            continue
        table = json.loads(path.read_text(encoding="utf-8"))
        found.append(Edition(table["assignment"], table["base"], table["language"], path, table.get("notebook")))
    return found


def editions(course: Course) -> list[Edition]:
    """Every assignment's edition of the course (the translation files of source/ assignments)."""
    return [edition for edition in all_editions(course) if edition.notebook is None]


def companions(course: Course) -> list[Edition]:
    """The editions of the ungraded companion notebooks (translation files naming a ``"notebook"``)."""
    return [edition for edition in all_editions(course) if edition.notebook is not None]


def edition_of(course: Course, assignment: str) -> Edition | None:
    return next((e for e in editions(course) if e.assignment == assignment), None)


def base_of(course: Course, assignment: str) -> str:
    """The assignment whose checks grade ``assignment``: itself unless it is an edition."""
    edition = edition_of(course, assignment)
    return edition.base if edition else assignment


def source_folder(course: Course, assignment: str) -> Path:
    """The assignment's folder in the course's source directory (``CourseDirectory.source_directory``)."""
    return course.folder("source", assignment=assignment)
