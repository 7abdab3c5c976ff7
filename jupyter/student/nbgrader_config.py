"""`make lab`'s nbgrader settings (this folder is on that server's JUPYTER_CONFIG_PATH): every student's (the course's
exchange, as the course's own nbgrader_config.py names it, and Validate's limits), and the student's folder, student/,
where the lab opens: Fetch writes each assignment there and Submit sends what was saved there.  Nothing of the
instructor's configuration (the hidden checks on PYTHONPATH) reaches the student's server."""
from pathlib import Path

from rlhf_course import exchange
from rlhf_course.classroom import config
from rlhf_course.exchange.local import STUDENT_FOLDER

COURSE_ROOT = Path(__file__).resolve().parents[2]

c = get_config()  # noqa: F821  (provided by traitlets when it loads this file)
config.student(c, *exchange.from_environment(COURSE_ROOT))  # as every student's (rlhf_course/classroom/config.py)
c.Exchange.assignment_dir = str(COURSE_ROOT / STUDENT_FOLDER)
