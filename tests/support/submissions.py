"""Helpers for tests that lay out or inspect submissions."""
from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

# What a batch writes into the course (everything else in it must stay as it was).
GRADER_OUTPUTS = ("gradebook.db", "grades.csv", "grading_report.csv", "autograded", "feedback")


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
