"""Helpers for tests that lay out or inspect submissions."""
from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

# What a batch writes into the course (everything else in it must stay as it was).
GRADER_OUTPUTS = ("gradebook.db", "grades.csv", "grading_report.csv", "autograded", "feedback", "misconceptions.json",
                  "class_report")

# A cell that prints which rlhf_course the sandbox imported, and whether it is the wheel that test_course_elsewhere.py
# builds (with a marker module the checkout's editable install does not have).
PACKAGE_PROBE = ("import rlhf_course, importlib.util\n"
                 "print('sandbox package:', rlhf_course.__file__)\n"
                 "print('marker:', importlib.util.find_spec('rlhf_course._install_marker') is not None)")


def add_cells(path: Path, extra: list[tuple[str, str]]) -> None:
    """Append cells (kind, source) to a submitted notebook, as a student adding cells would."""
    nb = json.loads(path.read_text())
    for index, (kind, source) in enumerate(extra):
        cell = {"cell_type": kind, "id": f"extra-{index}", "metadata": {}, "source": source}
        if kind == "code":
            cell.update(outputs=[], execution_count=None)
        nb["cells"].append(cell)
    path.write_text(json.dumps(nb))


def tree_digest(root: Path) -> dict[str, str]:
    digest = {}
    for path in sorted(root.rglob("*")):
        relative = path.relative_to(root)
        if relative.parts[0] in GRADER_OUTPUTS:
            continue
        if path.is_symlink():
            digest[str(relative)] = "-> " + os.readlink(path)
        elif path.is_file():
            digest[str(relative)] = hashlib.sha256(path.read_bytes()).hexdigest()
    return digest


def canonical_json(course: Path, student: str, assignment: str, notebook: str) -> str:
    """The canonical copy intake makes of a submitted notebook (what the grader runs and pages show)."""
    import nbformat

    from rlhf_course.grading import intake
    from rlhf_course.course import notebooks
    from rlhf_course.course.limits import Limits
    release_nb = notebooks.read(course / "release" / assignment / notebook)
    nb, _ = intake.take_in(course / "submitted" / student / assignment, notebook, release_nb, Limits())
    return nbformat.writes(nb)


def ran_with_outputs(canonical: str, outputs: dict) -> str:
    """The canonical copy as if the course's run of it had printed ``outputs`` (grade id -> list of
    output dicts; "answer": the first answer cell) - what a sandbox's feedback run sends back."""
    nb = json.loads(canonical)
    first_answer = next(c for c in nb["cells"] if c["cell_type"] == "code"
                        and c.get("metadata", {}).get("nbgrader", {}).get("solution"))
    for cell in nb["cells"]:
        gid = cell.get("metadata", {}).get("nbgrader", {}).get("grade_id")
        key = "answer" if cell is first_answer and "answer" in outputs else gid
        if cell["cell_type"] == "code" and key in outputs:
            cell["outputs"] = outputs[key]
    return json.dumps(nb)
