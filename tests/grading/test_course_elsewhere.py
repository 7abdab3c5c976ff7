"""Trusted grading of a course that lives in another folder than the checkout the environment was
installed from, with the grader's package installed non-editable (a wheel): the sandbox imports exactly the
package the grader runs, whatever the environment points at.  The editable install's case, run from another folder
than the course's, is tests/grading/test_grader_attacks.py's (the same probe in its bystander's notebook)."""
from __future__ import annotations

import csv
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from rlhf_course import ASSIGNMENT, NOTEBOOK
from rlhf_course.grading import examples
from rlhf_course.course.settings import Course
from tests.support.course import REPO, copy_course, needs_sandbox, release_course
from tests.support.submissions import PACKAGE_PROBE, add_cells

pytestmark = [pytest.mark.slow, needs_sandbox]

@pytest.fixture(scope="module")
def wheel_install(tmp_path_factory) -> Path:
    """The package built and installed as a wheel into a folder of its own, with a marker module
    that the checkout (the environment's editable install) does not have."""
    source, target = tmp_path_factory.mktemp("src"), tmp_path_factory.mktemp("site")
    shutil.copy2(REPO / "pyproject.toml", source / "pyproject.toml")
    shutil.copytree(REPO / "rlhf_course", source / "rlhf_course", ignore=shutil.ignore_patterns("__pycache__"))
    (source / "rlhf_course" / "_install_marker.py").write_text("WHERE = 'wheel'\n")
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation",
                    "--disable-pip-version-check", "--target", str(target), str(source)], check=True)
    assert (target / "rlhf_course" / "_install_marker.py").exists()
    return target


@pytest.fixture(scope="module")
def elsewhere(tmp_path_factory) -> Path:
    course = copy_course(tmp_path_factory.mktemp("elsewhere") / "another course")
    release_course(course)
    course_handle = Course.at(course)
    folder = examples.write_submission(course_handle, "ada", examples.answers_for(course_handle, ()))
    add_cells(folder / NOTEBOOK, [("code", PACKAGE_PROBE)])
    return course


def _grade(course: Path, cwd: Path, pythonpath: str | None) -> str:
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)
    if pythonpath:
        env["PYTHONPATH"] = pythonpath
    proc = subprocess.run([sys.executable, "-m", "rlhf_course.grading", "grade", "--course-root", str(course),
                           "--workers", "1"], cwd=cwd, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    with open(course / "grading_report.csv") as handle:
        row = next(csv.DictReader(handle))
    assert row["state"] == "graded" and float(row["score"]) == 44, row
    return (course / "feedback" / "ada" / ASSIGNMENT / "rlhf_building_blocks.html").read_text()


# The folder a command runs in decides nothing about which package is imported (neither the course root nor another
# folder holds one; the sandbox's comes from the grader): the wheel is graded from the course root here, the
# editable install from another folder in tests/grading/test_grader_attacks.py (its bystander runs the same probe).
def test_grading_with_the_package_installed_as_a_wheel_from_the_course_root(elsewhere, wheel_install):
    page = _grade(elsewhere, elsewhere, str(wheel_install))
    assert "sandbox package: /opt/rlhf-grader/rlhf_course/__init__.py" in page
    assert "marker: True" in page  # the wheel the grader runs, not the environment's editable checkout
