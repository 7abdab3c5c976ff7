"""The instructor's release, built on nbgrader's own steps: source/<assignment>/ -> release/<assignment>/.

The release runs in this process with the course's configuration (:mod:`generate`).  :func:`nbgrader`
runs one of nbgrader's commands as an instructor would type it, from the course root (it reads
``nbgrader_config.py`` there and nothing else: the tests' ``nbgrader validate``).
"""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from rlhf_course.grading import editions, instructor
from rlhf_course.course import release_manifest
from rlhf_course.grading.generate import GenerateError, generate_assignments
from rlhf_course.course.settings import Course


def nbgrader(folder: Path, *args: str, check: bool = True,
             extra_env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """Run one nbgrader command in ``folder`` (a course root, or a student's home) with this interpreter's
    environment."""
    return python_module(folder, "nbgrader", *args, check=check, extra_env=extra_env)


def python_module(folder: Path, module: str, *args: str, check: bool = True,
                  extra_env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """``python -m module args`` in ``folder`` with this interpreter's environment (nbgrader's commands read the
    nbgrader_config.py of the course root they run in, and find ``alembic`` on PATH)."""
    env = dict(os.environ, **(extra_env or {}))
    bin_dir = str(Path(sys.executable).parent)
    env["PATH"] = bin_dir + os.pathsep + env.get("PATH", "")
    proc = subprocess.run([sys.executable, "-m", module, *args], cwd=folder, env=env,
                          capture_output=True, text=True)
    if check and proc.returncode != 0:
        name = "nbgrader" if module == "nbgrader" else f"python -m {module}"
        raise RuntimeError(f"{name} {' '.join(args)} failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
    return proc


def source_assignments(course: Course) -> list[str]:
    """The assignments an instructor wrote: the folders of the source directory holding notebooks."""
    folder = course.folder("source")
    return sorted(p.name for p in folder.iterdir() if p.is_dir() and any(p.glob("*.ipynb")))


def generate_release(course: Course, assignments: list[str] | None = None) -> list[Path]:
    """For each assignment (default: all of the source directory): record it in the gradebook, with its
    configured due date where the gradebook has none, then source/<assignment>/ -> release/<assignment>/ (nbgrader records the grade cells;
    release/<assignment> is replaced only by a complete student version: :mod:`generate`),
    each generated file's hash in release/manifest.json (:mod:`release_manifest`), all with the course's configuration.
    Language editions (``i18n/``) are built into the source directory first, and, for the whole course, the
    companion notebooks' editions beside them (notebooks/).  Returns the released notebooks."""
    # The English hidden-test headers, from the checks' messages (the editions' are written from the translations)
    for base in sorted({editions.base_of(course, name) for name in assignments or source_assignments(course)}):
        try:
            checks = instructor.checks_of(course, base)
        except instructor.NotReady:
            continue
        editions.write_english_headers(course, base, checks)
    for edition in editions.editions(course):  # source/<base> + i18n/ -> source/<edition> first
        if assignments is None or edition.assignment in assignments:
            editions.build_source(course, edition, instructor.checks_of(course, edition.base))
    if assignments is None:  # the companion notebooks' editions (notebooks/<name>_zh.ipynb): the whole course's release
        editions.build_companions(course)
    assignments = assignments or source_assignments(course)
    if not assignments:
        return []
    # `nbgrader db assignment add --duedate` and `nbgrader generate_assignment --force` for each, in this
    # process through nbgrader's API, with this course's configuration
    try:
        generate_assignments(course, assignments)
    except GenerateError as failed:  # the assignments generated before it are released all the same
        if failed.generated:
            release_manifest.record(course.folder("release"), failed.generated, list(course.coursedir.ignore))
        raise
    # what the release to the exchange checks it publishes (rlhf_course/exchange/release.py)
    release_manifest.record(course.folder("release"), assignments, list(course.coursedir.ignore))
    return [path for assignment in assignments
            for path in sorted(course.folder("release", assignment=assignment).glob("*.ipynb"))]
