"""The catalogues of answers (instructor/<assignment>_catalogue.py) and what they are written with
(rlhf_course/grading/catalogue.py): each is named for its assignment and loads on its own, in a course that has
no other catalogue."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest

from rlhf_course.grading.catalogue import WrongAnswer, by_name
from tests.support.course import REPO


def test_each_catalogue_is_named_for_an_assignment():
    catalogues = sorted(p.name.removesuffix("_catalogue.py") for p in (REPO / "instructor").glob("*_catalogue.py"))
    assert catalogues == ["grpo", "kl_penalty", "rlhf"]
    assert set(catalogues) <= {p.name for p in (REPO / "source").iterdir() if p.is_dir()}


@pytest.mark.parametrize("base", ["grpo", "kl_penalty", "rlhf"])
def test_a_catalogue_loads_alone_in_a_course_of_its_own(tmp_path, base):
    """In a fresh process whose only instructor file is this catalogue: the grader finds its wrong answers and
    their misconceptions (nothing is imported from another assignment's catalogue)."""
    (tmp_path / "instructor").mkdir()
    shutil.copy(REPO / "instructor" / f"{base}_catalogue.py", tmp_path / "instructor")
    code = ("import sys\nfrom rlhf_course.course.settings import Course\nfrom rlhf_course.grading import misconceptions\n"
            "wrong, named = misconceptions.catalogue(Course.at(sys.argv[1]), sys.argv[2])\n"
            "print(len(wrong), sorted(named) == sorted(w.name for w in wrong))\n")
    run = subprocess.run([sys.executable, "-c", code, str(tmp_path), base], capture_output=True, text=True,
                         cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert run.returncode == 0, run.stderr
    count, complete = run.stdout.split()
    assert int(count) >= 5 and complete == "True"


def test_two_entries_of_one_name_are_refused_by_name():
    entries = [WrongAnswer("eps_inside", "cell", "", frozenset()), WrongAnswer("eps_inside", "cell", "", frozenset()),
               WrongAnswer("no_min", "cell", "", frozenset())]
    with pytest.raises(ValueError, match="catalogue entries named twice: eps_inside$"):
        by_name(entries)
    assert list(by_name(entries[1:])) == ["eps_inside", "no_min"]
