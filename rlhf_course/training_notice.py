"""While a training holds this kernel, every explorer it shows says that its sliders wait.

A lab's training cell (:func:`rlhf_course.lab.training_slots.training_slot`: a wait for a slot, then the training)
keeps the kernel busy: a slider moved meanwhile changes nothing until the cell ends, then the plot jumps.  So each
explorer registers its status line here (:func:`register`), and :func:`training_in_this_kernel` writes the notice in
every registered line on entering and empties them on leaving, an error or an interrupt included.  A kernel sends a
widget's new state on iopub at once, even while a cell runs, so the page shows the line during the training.

Nothing here imports ipywidgets: under nbgrader no explorer is built, nothing registers, and a training only counts.
"""
from __future__ import annotations

import contextlib
import html
import weakref
from typing import Iterator

from rlhf_course.i18n import t

# "a training cell", not "training": the line shows while the cell waits for a slot too
NOTICE = "A training cell is running in this notebook: slider moves wait, and the plot redraws when it ends"
NOTICE_CLASS = "rlhf-training-notice"  # the line's CSS class in the page (the browser test finds it by it)

# The explorers' status lines (ipywidgets.HTML): held weakly, so that a closed or forgotten explorer leaves no trace.
_status_lines: "weakref.WeakSet" = weakref.WeakSet()
_trainings_running = 0  # a training inside another (a lab calling a lab): the lines empty when the outer one ends


def notice_html() -> str:
    """The notice as the status line shows it, in the language the kernel speaks now."""
    return f"<i>{html.escape(t(NOTICE))}</i>"


def _show(line, text: str) -> None:
    """``text`` (HTML) in ``line``, which takes no room in the page while it says nothing."""
    line.value = text
    line.layout.display = None if text else "none"


def register(line) -> None:
    """Keep ``line`` (an ipywidgets.HTML next to an explorer's sliders) told of this kernel's trainings: showing
    the notice now if a training is running (an explorer built inside a training), else nothing."""
    _status_lines.add(line)
    _show(line, notice_html() if _trainings_running else "")


@contextlib.contextmanager
def training_in_this_kernel() -> Iterator[None]:
    """The ``with`` block is a training (its wait for a slot included): every registered status line shows the
    notice until the block ends, however it ends."""
    global _trainings_running
    _trainings_running += 1
    try:
        if _trainings_running == 1:
            text = notice_html()
            for line in list(_status_lines):
                _show(line, text)
        yield
    finally:
        _trainings_running -= 1
        if _trainings_running == 0:
            for line in list(_status_lines):
                _show(line, "")
