"""The class's cache of the explorers' first figures (rlhf_course/first_figures.py), rendered from the reference.

    python -m rlhf_course.classroom.first_figures FOLDER [--course ROOT]

``make hub`` runs it as root when the hub starts, with the servers' Python (the students' kernels' matplotlib, fonts
and settings, so that a hit is the very PNG their kernel would render), into a folder every student reads and none
writes.  The reference answers are the course's source notebooks' solutions, English and each edition's; the folder
gets only their pictures and the keys that name them.
"""
from __future__ import annotations

import json
import os
from pathlib import Path

from rlhf_course import first_figures


def first_values(sliders) -> dict:
    """The values an explorer's sliders start at: what its first drawing is called with."""
    import ipywidgets as widgets
    return {name: widget.value for name, widget in sliders(widgets).items()}


def render_first_figure(student_function, plot, sliders) -> tuple[str, bytes]:
    """(key, PNG) of one explorer's first figure drawn from ``student_function``, in this process's language,
    as :func:`rlhf_course.figure_output.show` renders it."""
    import matplotlib.pyplot as plt

    from rlhf_course import figure_output
    from rlhf_course.i18n import plot_language
    values = first_values(sliders)
    drawn = plot(student_function, **values)
    figure = plt.gcf()
    try:
        return (first_figures.figure_key(figure, plot.__name__, values, drawn, plot_language()),
                figure_output.whole_png(figure))
    finally:
        plt.close(figure)


def reference_editions(course_root: Path) -> dict[str, Path]:
    """language -> the source notebook of the assignment in that language (the English source, each translation's
    generated source): their solution cells define the reference answers."""
    from rlhf_course import ASSIGNMENT, NOTEBOOK
    from rlhf_course.course.editions import editions, source_folder
    from rlhf_course.course.settings import Course
    from rlhf_course.i18n import ENGLISH
    course = Course.at(course_root)
    found = {ENGLISH: source_folder(course, ASSIGNMENT) / NOTEBOOK}
    for edition in editions(course):
        if edition.base == ASSIGNMENT:
            found[edition.language] = source_folder(course, edition.assignment) / NOTEBOOK
    return found


def write_first_figures(folder: Path, course_root: Path) -> dict[str, str]:
    """Render every explorer's first figure from each edition's reference answers into ``folder`` (made if missing):
    ``<key>.png`` each, readable by all, then ``index.json`` (key -> file name), written last and whole so that a
    kernel never reads half a folder.  Returns the index."""
    import matplotlib

    from rlhf_course import STUDENT_FUNCTIONS, explorers, i18n
    from rlhf_course.lab.notebook_functions import functions_from_notebook

    folder.mkdir(parents=True, exist_ok=True)
    index: dict[str, str] = {}
    spoken = i18n.language()
    try:
        for language, notebook in reference_editions(course_root).items():
            reference = functions_from_notebook(notebook, STUDENT_FUNCTIONS)
            i18n.set_language(language)
            with matplotlib.rc_context():  # the Chinese labels put the CJK font in rcParams: not for the next
                for name, (plot, sliders) in explorers.EXPLORERS.items():
                    key, png = render_first_figure(reference[name], plot, sliders)
                    path = folder / f"{key}.png"
                    path.write_bytes(png)
                    path.chmod(0o644)
                    index[key] = path.name
    finally:
        i18n.set_language(spoken)
    partial = folder / f".{first_figures.INDEX}.partial"
    partial.write_text(json.dumps({"format": first_figures.FORMAT, "figures": index}, indent=1, sort_keys=True))
    partial.chmod(0o644)
    os.replace(partial, folder / first_figures.INDEX)
    return index


def main(argv: list[str] | None = None) -> int:
    """``python -m rlhf_course.classroom.first_figures FOLDER [--course ROOT]``: fill the folder from the course's
    reference answers (`make hub` does, as it starts)."""
    import argparse

    import matplotlib

    from rlhf_course import COURSE_ROOT
    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("folder", type=Path)
    parser.add_argument("--course", type=Path, default=COURSE_ROOT, help="the course directory (its source/)")
    args = parser.parse_args(argv)
    matplotlib.use("Agg")  # the canvas the inline backend renders with
    index = write_first_figures(args.folder, args.course)
    size = sum((args.folder / name).stat().st_size for name in index.values())
    print(f"{len(index)} first figures in {args.folder} ({size / 1e3:.0f} kB)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
