"""The pages wing: every page grading shows a person, and their templates (``templates/``).

The student's feedback page (:mod:`feedback`, rendered by :mod:`feedback_html` through :mod:`safe_html` and
:mod:`math_html`, in a long-lived :mod:`page_process`), the page returned when a grade changed
(:mod:`returned_feedback`, from :mod:`grading_record`), the instructor's class report (:mod:`class_report`) and the
Formgrader's pages (:mod:`formgrader_pages`, its templates in ``templates/formgrade/``)."""
from pathlib import Path

TEMPLATES = Path(__file__).resolve().parent / "templates"  # one folder per page: feedback, class_report, formgrade
