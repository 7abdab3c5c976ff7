"""A notebook's functions, loaded for a lab: its set-up and answer cells run in a fresh namespace.

The labs' command lines (``python -m rlhf_course.lab.ppo_dpo``, ``lab.grpo``, ``lab.frontier``), the frontier
notebook and the benches train on the functions a completed notebook defines.  Grading never does: it runs a
submission only in its sandbox.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Callable

SET_UP_CELL = "setup"  # the locked set-up cell's grade id (imports and helpers the answers use)


def functions_from_notebook(path: str | Path, names: tuple[str, ...]) -> dict[str, Callable]:
    """Execute a notebook's setup and answer cells in a fresh namespace; return the named functions.

    Only cells that define the answers run (the locked setup cell and the answer cells), so
    loading a student's notebook never runs its tests or demos.
    """
    raw = json.loads(Path(path).read_text(encoding="utf-8"))
    cells = raw.get("cells") if raw.get("nbformat") == 4 else None
    if not isinstance(cells, list):  # not a v4 notebook: nbformat converts (or says what is wrong)
        import nbformat
        cells = nbformat.read(str(path), as_version=4).cells
    namespace: dict = {"__name__": "student_notebook"}
    for cell in cells:
        meta = cell.get("metadata", {}).get("nbgrader", {})
        if cell.get("cell_type") == "code" and (meta.get("solution", False) or meta.get("grade_id") == SET_UP_CELL):
            source = cell.get("source", "")
            source = source if isinstance(source, str) else "".join(source)
            exec(compile(source, f"{Path(path).name}:{meta.get('grade_id')}", "exec"), namespace)
    missing = [name for name in names if not callable(namespace.get(name))]
    if missing:
        from rlhf_course.i18n import t
        raise LookupError(t("{path} does not define {names}", path=path, names=", ".join(missing)))
    return {name: namespace[name] for name in names}
