"""The Formgrader's page renderer as nbgrader builds it from this course's nbgrader_config.py, for the tests of what
it shows (a student's text through the sanitiser, the formulas MathJax is given)."""
from pathlib import Path


def formgrader_exporter():
    """nbconvert's HTMLExporter as nbgrader's Formgrader builds it, from this course's nbgrader_config.py."""
    from nbconvert import HTMLExporter

    from rlhf_course.course.settings import course_config
    config = course_config(Path(__file__).resolve().parents[2])
    config.HTMLExporter.template_name = "formgrade"
    return HTMLExporter(config=config)


FORMGRADE_RESOURCES = {"assignment_id": "a", "notebook_id": "n", "submission_id": "s", "index": 0, "total": 1,
                       "base_url": "", "student": "s", "last_name": "", "first_name": "", "notebook_path": "n.ipynb"}
