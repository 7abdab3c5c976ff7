"""`make` on a Python too old for the pinned requirements (rlhf_course/python_version.py): it stops before creating
.venv with a sentence, in English and Chinese, naming the Python it found, the one it needs and what to do, instead of
pip's list of every version of the first package that refuses it.  The minimum is the pinned packages' own."""
from __future__ import annotations

import shutil
import subprocess
import sys
import tomllib
from importlib import metadata
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.version import Version

from rlhf_course import python_version
from rlhf_course.i18n import CHINESE, ENGLISH, t

REPO = Path(__file__).resolve().parents[1]
DEBIAN_PYTHON = "/usr/bin/python3"  # Debian 12's is 3.11.2


def _pinned() -> list[str]:
    lines = (REPO / "requirements.txt").read_text().splitlines()
    return [Requirement(line.split("#")[0].strip()).name for line in lines if line.split("#")[0].strip()]


def test_the_minimum_is_the_oldest_python_every_pinned_package_accepts():
    accepted = [SpecifierSet(metadata.metadata(name).get("Requires-Python") or "") for name in _pinned()]
    minimum = Version(".".join(map(str, python_version.MINIMUM)))
    major, minor, micro = python_version.MINIMUM
    assert all(minimum in spec for spec in accepted)
    assert not all(Version(f"{major}.{minor}.{micro - 1}") in spec for spec in accepted)  # one older is refused
    declared = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["requires-python"]
    assert SpecifierSet(declared) == SpecifierSet(f">={minimum}")


def test_an_older_python_is_told_what_it_is_what_is_needed_and_what_to_do_in_both_languages():
    assert python_version.problem(python_version.MINIMUM, "python3") is None
    assert python_version.problem((3, 12, 0), "python3") is None
    said = python_version.problem((3, 11, 2), "/usr/bin/python3")
    fields = {"minimum": "3.11.5", "python": "/usr/bin/python3", "found": "3.11.2"}
    assert said == "\n".join(t(python_version.TOO_OLD, language, **fields) for language in (ENGLISH, CHINESE))
    assert t(python_version.TOO_OLD, CHINESE, **fields) != t(python_version.TOO_OLD, ENGLISH, **fields)


@pytest.mark.skipif(not Path(DEBIAN_PYTHON).exists() or subprocess.run(
    [DEBIAN_PYTHON, "-c", f"import sys; sys.exit(sys.version_info[:3] < {python_version.MINIMUM})"]).returncode == 0,
    reason=f"needs a Python older than the minimum at {DEBIAN_PYTHON} (Debian 12's)")
def test_make_on_an_older_python_stops_before_the_venv_and_says_why(tmp_path):
    course = tmp_path / "course"
    for name in ("Makefile", "requirements.txt", "pyproject.toml", "jupyter/server/rlhf_course.json",
                 "jupyter/labextension/rlhf-course-deadlines/source-sha256.txt", "rlhf_course/__init__.py",
                 "rlhf_course/i18n.py", "rlhf_course/python_version.py"):
        (course / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO / name, course / name)
    done = subprocess.run(["make", "--no-print-directory", f"PYTHON={DEBIAN_PYTHON}", "lab"], cwd=course,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode != 0
    assert python_version.problem(
        tuple(int(n) for n in subprocess.run([DEBIAN_PYTHON, "-c", "import platform; print(platform.python_version())"],
                                             capture_output=True, text=True).stdout.split(".")), DEBIAN_PYTHON
    ) in done.stderr, done.stderr[-2000:]
    assert not (course / ".venv").exists()
