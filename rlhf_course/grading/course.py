"""The instructor's pipeline, built on nbgrader's own commands and gradebook.

    python -m rlhf_course.grading.course release      # source/<assignment>/ -> release/<assignment>/, each one
    python -m rlhf_course.grading.course examples     # grade the bundled example class, print a summary

nbgrader is run as a subprocess from the course root, exactly as an instructor would run it,
so it reads ``nbgrader_config.py`` there and finds ``alembic`` next to the interpreter.
"""
from __future__ import annotations

import argparse
import csv
import datetime as dt
import importlib.util
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import nbformat

from rlhf_course import ASSIGNMENT, COURSE_ROOT, NOTEBOOK
from rlhf_course.grading import notebooks


def nbgrader(course_root: Path, *args: str, check: bool = True,
             extra_env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """Run one nbgrader command in the course root with this interpreter's environment."""
    return python_module(course_root, "nbgrader", *args, check=check, extra_env=extra_env)


def python_module(course_root: Path, module: str, *args: str, check: bool = True,
                  extra_env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """``python -m module args`` in the course root with this interpreter's environment (nbgrader's
    commands read the course's nbgrader_config.py from there, and find ``alembic`` on PATH)."""
    env = dict(os.environ, **(extra_env or {}))
    bin_dir = str(Path(sys.executable).parent)
    env["PATH"] = bin_dir + os.pathsep + env.get("PATH", "")
    proc = subprocess.run([sys.executable, "-m", module, *args], cwd=course_root, env=env,
                          capture_output=True, text=True)
    if check and proc.returncode != 0:
        name = "nbgrader" if module == "nbgrader" else f"python -m {module}"
        raise RuntimeError(f"{name} {' '.join(args)} failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
    return proc


def course_config(course_root: Path):
    """The course's nbgrader configuration, loaded as nbgrader's commands load it from the course root:
    ``nbgrader_config`` (.json, then .py) from Jupyter's config paths, system-wide first, then the user's,
    then the course's own ``nbgrader_config.py``, each later file winning over the earlier ones."""
    from jupyter_core.paths import jupyter_config_path
    from traitlets.config import Config
    from traitlets.config.loader import JSONFileConfigLoader, PyFileConfigLoader

    config = Config()
    for folder in [*reversed(jupyter_config_path()), str(course_root)]:
        for loader, name in ((JSONFileConfigLoader, "nbgrader_config.json"), (PyFileConfigLoader, "nbgrader_config.py")):
            if os.path.isfile(os.path.join(folder, name)):
                config.merge(loader(name, path=folder).load_config())
    return config


def source_assignments(course_root: Path) -> list[str]:
    """The assignments an instructor wrote: the folders of ``source/`` holding notebooks."""
    folder = course_root / "source"
    return sorted(p.name for p in folder.iterdir() if p.is_dir() and any(p.glob("*.ipynb")))


def generate_release(course_root: Path = COURSE_ROOT, assignments: list[str] | None = None) -> list[Path]:
    """For each assignment (default: all of ``source/``): record it and its due date in the gradebook,
    then source/<assignment>/ -> release/<assignment>/ (nbgrader records the grade cells).  Language
    editions (``i18n/``) are built into source/ first.  Returns the released notebooks."""
    from rlhf_course.grading import editions, settings
    due_date = settings.load(course_root)[0].due_date
    for edition in editions.editions(course_root):  # source/<base> + i18n/ -> source/<edition> first
        if assignments is None or edition.assignment in assignments:
            checks = load_instructor_module(course_root, f"{edition.base}_hidden_checks").CHECKS
            editions.build_source(course_root, edition, checks)
    assignments = assignments or source_assignments(course_root)
    if not assignments:
        return []
    # `nbgrader db assignment add --duedate` and `nbgrader generate_assignment --force` for each, in
    # one process (generate.py: the same calls, nbgrader's start-up paid once instead of twice each)
    python_module(course_root, "rlhf_course.grading.generate", *assignments, f"--duedate={due_date or ''}")
    return [path for assignment in assignments for path in sorted((course_root / "release" / assignment).glob("*.ipynb"))]


def load_instructor_module(course_root: Path, name: str):
    """Import a module from the instructor-only folder (it is deliberately not a package)."""
    path = course_root / "instructor" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def answers_for(course_root: Path, wrong_names: tuple[str, ...] | None) -> dict[str, str]:
    """Answer cells for a submission: the reference solution with the named mistakes swapped in.

    ``None`` means an untouched release notebook (no answers at all).
    """
    if wrong_names is None:
        return {}
    catalogue = load_instructor_module(course_root, "answer_catalogue")
    answers = notebooks.solution_answers(notebooks.read(course_root / "source" / ASSIGNMENT / NOTEBOOK))
    for name in wrong_names:
        wrong = catalogue.WRONG_BY_NAME[name]
        answers[wrong.answer_cell] = wrong.source
    return answers


def write_submission(course_root: Path, student: str, answers: dict[str, str],
                     timestamp: dt.datetime | None = None, assignment: str = ASSIGNMENT,
                     notebook: str = NOTEBOOK) -> Path:
    """Lay out ``submitted/<student>/<assignment>/`` as ``nbgrader collect`` would."""
    release_nb = notebooks.read(course_root / "release" / assignment / notebook)
    folder = course_root / "submitted" / student / assignment
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    nbformat.write(notebooks.fill_answers(release_nb, answers), str(folder / notebook))
    stamp = timestamp or dt.datetime.now(dt.timezone.utc)
    stamp = stamp.replace(tzinfo=dt.timezone.utc) if stamp.tzinfo is None else stamp.astimezone(dt.timezone.utc)
    (folder / "timestamp.txt").write_text(stamp.strftime("%Y-%m-%d %H:%M:%S.%f UTC"))
    return folder


def autograde(course_root: Path, student: str | None = None, assignment: str = ASSIGNMENT) -> subprocess.CompletedProcess:
    args = ["autograde", assignment, "--force"]
    if student:
        args.append(f"--student={student}")
    # Stock in-kernel autograde, deliberately: the example class and the comparisons with trusted grading.
    return nbgrader(course_root, *args, extra_env={"RLHF_ALLOW_STOCK_AUTOGRADE": "1"})


def export_grades(course_root: Path, to: Path | None = None) -> Path:
    to = to or course_root / "grades.csv"
    nbgrader(course_root, "export", f"--to={to}")
    return to


@dataclass
class CellScore:
    grade_id: str
    score: float
    max_score: float


def cell_scores(db_url: str, student: str, assignment: str = ASSIGNMENT, notebook: str = NOTEBOOK) -> dict[str, CellScore]:
    """Per grade cell scores of one student's submission, straight from the gradebook."""
    from nbgrader.api import Gradebook

    with Gradebook(db_url) as gb:
        nb = gb.find_submission_notebook(notebook.removesuffix(".ipynb"), assignment, student)
        return {g.name: CellScore(g.name, float(g.score), float(g.max_score)) for g in nb.grades}


def gradebook_url(course_root: Path) -> str:
    """The gradebook every nbgrader command of this course uses: ``CourseDirectory.db_url`` from its
    configuration (nbgrader's default, ``gradebook.db`` in the course root, where it is silent)."""
    from nbgrader.coursedir import CourseDirectory
    config = course_config(course_root)
    if "root" not in config.get("CourseDirectory", {}):
        config.CourseDirectory.root = str(Path(course_root).resolve())
    return CourseDirectory(config=config).db_url


def summary_table(course_root: Path, students: list[str]) -> str:
    lines = [f"{'student':<20} {'score':>12}  lost points on"]
    for student in students:
        scores = cell_scores(gradebook_url(course_root), student)
        total = sum(s.score for s in scores.values())
        possible = sum(s.max_score for s in scores.values())
        lost = [s.grade_id for s in scores.values() if s.score < s.max_score]
        shown = ", ".join(lost[:4]) + (f" (+{len(lost) - 4} more)" if len(lost) > 4 else "")
        lines.append(f"{student:<20} {total:>5.1f} / {possible:<5.1f}  {shown or '-'}")
    return "\n".join(lines)


def grade_examples(course_root: Path = COURSE_ROOT) -> str:
    catalogue = load_instructor_module(course_root, "answer_catalogue")
    generate_release(course_root)
    # The examples were handed in on time, whenever the demo runs.
    from nbgrader.utils import parse_utc
    from rlhf_course.grading import settings
    due = settings.load(course_root)[0].due_date
    on_time = parse_utc(due) - dt.timedelta(hours=1) if due else None
    for student, wrong in catalogue.EXAMPLE_SUBMISSIONS.items():
        write_submission(course_root, student, answers_for(course_root, wrong), timestamp=on_time)
    autograde(course_root)
    grades = export_grades(course_root)
    with open(grades) as handle:
        rows = list(csv.DictReader(handle))
    table = summary_table(course_root, list(catalogue.EXAMPLE_SUBMISSIONS))
    return f"{table}\n\nexported {len(rows)} row(s) to {grades}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("command", choices=["release", "examples"])
    parser.add_argument("--course-root", type=Path, default=Path.cwd(), help="default: the current directory, as for nbgrader")
    args = parser.parse_args(argv)
    if args.command == "release":
        for path in generate_release(args.course_root):
            print("generated", path)
    else:
        print(grade_examples(args.course_root))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
