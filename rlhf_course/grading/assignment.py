"""One assignment as grading sees it, resolved once and passed down: its name, the base whose
checks grade it (itself, or for a language edition the assignment it translates), the language its
students read, those checks with their messages in that language, and its released notebooks."""
from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path

from rlhf_course.grading import editions, instructor
from rlhf_course.course import notebooks
from rlhf_course.course.settings import Course, NotReady
from rlhf_course.i18n import ENGLISH


@dataclass(frozen=True)
class Assignment:
    name: str
    base: str
    language: str
    checks: dict  # grade id -> Check, messages in ``language``
    release_folder: Path

    @property
    def notebooks(self) -> list[str]:
        """The released notebooks' file names."""
        return sorted(p.name for p in self.release_folder.glob("*.ipynb"))

    def release_notebook(self, notebook: str):
        """The student version of one notebook, read once per version of the file; never modified."""
        info = (self.release_folder / notebook).stat()
        return _read_release(str(self.release_folder / notebook), info.st_mtime_ns, info.st_size)

    def notebook_checks(self, release_nb) -> dict:
        """The checks that decide this notebook's autograded cells, in the instructor module's order: one
        per code grade cell of the release.  A cell without a check is a mistake in the course, never a
        reason to award or withhold its points."""
        cells = [notebooks.grade_id(cell) for cell in release_nb.cells
                 if cell.cell_type == "code" and cell.get("metadata", {}).get("nbgrader", {}).get("grade")]
        missing = [gid for gid in cells if gid not in self.checks]
        if missing:
            raise ValueError(f"{instructor.checks_module_name(self.base)} has no check for the grade cell(s) "
                             f"{', '.join(missing)}")
        return {gid: check for gid, check in self.checks.items() if gid in cells}


@functools.lru_cache(maxsize=8)
def _read_release(path: str, mtime_ns: int, size: int):
    return notebooks.read(path)


def resolve(course: Course, name: str) -> Assignment:
    """The assignment ``name`` of the course, or :class:`NotReady` saying what is missing."""
    edition = editions.edition_of(course, name)
    base = edition.base if edition else name
    checks = editions.localized_checks(instructor.checks_of(course, base), edition)
    release_folder = course.folder("release", assignment=name)
    if not any(release_folder.glob("*.ipynb")):
        raise NotReady(f"no release of {name!r} in {release_folder}: run `make release` first")
    return Assignment(name, base, edition.language if edition else ENGLISH, checks, release_folder)
