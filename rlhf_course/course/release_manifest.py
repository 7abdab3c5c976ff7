"""What `make release` generated, so that a release to the exchange can prove it publishes exactly that.

``make release`` (:func:`rlhf_course.grading.release.generate_release`) records the SHA-256 of every file it
generated in ``release/manifest.json`` (committed with release/).  ``nbgrader release_assignment`` (the course's
class, :mod:`rlhf_course.exchange.release`) calls :func:`problems` and refuses to publish when any file of the
assignment's release folder differs from its recorded hash (a notebook edited in release/, say by a student who
opened it), when the folder holds a file the release did not make, and when a notebook holds a solution region,
a hidden-test region or any line that only the source's solution and hidden-test regions hold.

    release/manifest.json   {"assignments": {"rlhf": {"rlhf_building_blocks.ipynb": "<sha256 hex>", ...}, ...}}
"""
from __future__ import annotations

import fnmatch
import hashlib
import json
import re
from pathlib import Path

MANIFEST = "manifest.json"
MARKERS = ("### BEGIN SOLUTION", "### END SOLUTION", "### BEGIN HIDDEN TESTS", "### END HIDDEN TESTS")
SECRET_BLOCK = re.compile(r"### BEGIN (SOLUTION|HIDDEN TESTS)[ \t]*\n(.*?)### END \1", re.DOTALL)
REMAKE = "run `make release` (python -m rlhf_course.grading release) to regenerate it from source/, then release again"


def file_hash(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def released_files(folder: Path, ignore: list[str]) -> dict[str, Path]:
    """The files nbgrader's release would copy from ``folder`` (names matching ``ignore``, nbgrader's
    ``CourseDirectory.ignore`` patterns, skipped at any depth, as its copy skips them): relative path -> path."""
    found = {}
    for path in sorted(folder.rglob("*")):
        relative = path.relative_to(folder)
        if any(fnmatch.fnmatch(part, pattern) for part in relative.parts for pattern in ignore):
            continue
        if path.is_file():
            found[relative.as_posix()] = path
    return found


def read(release_folder: Path) -> dict[str, dict[str, str]]:
    """The manifest's assignments ({} when there is none)."""
    path = release_folder / MANIFEST
    if not path.is_file():
        return {}
    return json.loads(path.read_text())["assignments"]


def record(release_folder: Path, assignments: list[str], ignore: list[str]) -> Path:
    """Record the hash of every file of each of ``assignments``' release folders, keeping the other assignments'
    entries (a release of one assignment leaves the others' as they were); the manifest's path."""
    recorded = read(release_folder)
    for assignment in assignments:
        folder = release_folder / assignment
        recorded[assignment] = {name: file_hash(path) for name, path in released_files(folder, ignore).items()}
    path = release_folder / MANIFEST
    path.write_text(json.dumps({"assignments": dict(sorted(recorded.items()))}, indent=1, sort_keys=True) + "\n")
    return path


def secret_only_lines(source_nb) -> set[str]:
    """The stripped, non-blank lines inside the source's solution and hidden-test regions that appear nowhere
    else in the source notebook (a line shared with the visible text, e.g. ``import torch``, gives nothing away)."""
    secret, visible = set(), set()
    for cell in source_nb.cells:
        text = cell.source
        for _, block in SECRET_BLOCK.findall(text):
            secret.update(line.strip() for line in block.splitlines() if line.strip())
        visible.update(line.strip() for line in SECRET_BLOCK.sub("", text).splitlines() if line.strip())
    return secret - visible - {marker for marker in MARKERS}


def notebook_secrets(notebook_path: Path, source_path: Path | None) -> list[str]:
    """Why a release notebook gives answers away (empty: it does not): a solution or hidden-test marker, or a
    line only the source notebook's solution and hidden-test regions hold, each named with its cell."""
    from rlhf_course.course import notebooks
    nb = notebooks.read(notebook_path)
    secrets = secret_only_lines(notebooks.read(source_path)) if source_path and source_path.is_file() else set()
    reasons = []
    for number, cell in enumerate(nb.cells, start=1):
        for marker in MARKERS[::2]:
            if marker in cell.source:
                what = "a solution region" if "SOLUTION" in marker else "hidden-test code"
                reasons.append(f"cell {number} holds {what} ({marker!r})")
        leaked = [line for line in dict.fromkeys(line.strip() for line in cell.source.splitlines()) if line in secrets]
        if leaked:
            reasons.append(f"cell {number} holds {len(leaked)} line(s) of the source's solution or hidden tests "
                           f"(first: {leaked[0][:80]!r})")
    return reasons


def problems(release_folder: Path, source_folder: Path, assignment: str, ignore: list[str]) -> list[str]:
    """Why ``assignment``'s release folder must not be published (empty: it may), each reason naming its file."""
    recorded = read(release_folder).get(assignment)
    folder = release_folder / assignment
    shown = f"{release_folder.name}/{assignment}"
    found = released_files(folder, ignore)
    reasons = []
    if recorded is None:
        reasons.append(f"{release_folder / MANIFEST} records no release of {assignment!r}: {REMAKE}")
        recorded = {}
    for name, path in found.items():
        if name not in recorded:
            if recorded:
                reasons.append(f"{shown}/{name} was not made by `make release` (remove it, or {REMAKE})")
        elif file_hash(path) != recorded[name]:
            reasons.append(f"{shown}/{name} differs from what `make release` generated (edited since, perhaps "
                           f"opened and saved in JupyterLab): {REMAKE}")
        if name.endswith(".ipynb"):
            for reason in notebook_secrets(path, source_folder / assignment / name):
                reasons.append(f"{shown}/{name}: {reason}: it would give answers away")
    for name in sorted(set(recorded) - set(found)):
        reasons.append(f"{shown}/{name} is missing (`make release` generated it): {REMAKE}")
    return reasons
