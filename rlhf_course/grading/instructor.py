"""The instructor-only folder (``instructor/``, deliberately not a package and never released):
each assignment's checks, ``instructor/<assignment>_hidden_checks.py``, and the example answers."""
from __future__ import annotations

import importlib.util
import sys

from rlhf_course.course.settings import Course, NotReady

FOLDER = "instructor"


def checks_module_name(assignment: str) -> str:
    """The documented rule: an assignment's checks are ``instructor/<assignment>_hidden_checks.py``."""
    return f"{assignment}_hidden_checks"


def load_module(course: Course, name: str):
    """Import ``instructor/<name>.py`` of the course."""
    path = course.root / FOLDER / f"{name}.py"
    if not path.is_file():
        raise NotReady(f"{path} is missing")
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def checks_of(course: Course, base: str) -> dict:
    """The checks of an assignment written in ``source/<base>/``: grade id -> Check, in English."""
    try:
        return load_module(course, checks_module_name(base)).CHECKS
    except NotReady as exc:
        raise NotReady(f"assignment {base!r} has no checks: {exc}") from None
