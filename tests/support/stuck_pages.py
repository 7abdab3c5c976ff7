"""Page renderers that misbehave on purpose, for :mod:`rlhf_course.grading.pages.page_process`'s tests: they
run in the page process (imported there by name), as a render stuck in one step would."""
from __future__ import annotations

import os
import time


def stuck_in_one_step(*args):
    """Never returns and never reaches a budget check (a parser's catastrophic case)."""
    while True:
        time.sleep(0.05)


def stuck_when_asked(result, max_cells, seconds):
    """The real page, except for the student named ``stuck``."""
    if result.student == "stuck":
        stuck_in_one_step()
    from rlhf_course.grading.pages.feedback import render_page
    return render_page(result, max_cells, seconds)


def pid(*args) -> int:
    return os.getpid()


def raises(*args):
    raise ValueError("a bad page")


def dies(*args):
    os._exit(3)
