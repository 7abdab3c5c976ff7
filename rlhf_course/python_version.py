"""Whether this Python can install the course's pinned ``requirements.txt``: ``python -m rlhf_course.python_version``.

The Makefile runs it with ``$(PYTHON)`` before it creates ``.venv``: the oldest Python every pinned package accepts
is 3.11.5 (their ``Requires-Python``: tests/test_python_version.py reads them), and with an older one pip stops on
the first such package with a list of every version it found, which names neither the cause nor the way out.  It
imports nothing outside the standard library: it runs before anything is installed.
"""
from __future__ import annotations

import sys

from rlhf_course.i18n import CHINESE, ENGLISH, t

MINIMUM = (3, 11, 5)  # as pyproject.toml's requires-python says
TOO_OLD = ("make needs Python {minimum} or later to install the course's pinned requirements.txt, and {python} is "
           "Python {found}. Install a newer Python 3.11 (the course's image and environment.yml use 3.11.7), delete "
           "the .venv folder a failed attempt left, if any, and run make again with it: e.g. make lab "
           "PYTHON=/path/to/python3.11")


def problem(version: tuple[int, ...], python: str) -> str | None:
    """None if Python ``version`` (major, minor, micro) can install the requirements, else why not and what to do,
    in English and in Chinese (no notebook says which the student reads yet)."""
    if tuple(version[:3]) >= MINIMUM:
        return None
    fields = {"minimum": ".".join(map(str, MINIMUM)), "python": python, "found": ".".join(map(str, version[:3]))}
    return "\n".join(t(TOO_OLD, language, **fields) for language in (ENGLISH, CHINESE))


def main() -> None:
    said = problem(sys.version_info, sys.executable)
    if said:
        print(said, file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
