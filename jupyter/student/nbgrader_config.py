"""`make lab`'s nbgrader settings (this folder is on that server's JUPYTER_CONFIG_PATH): the course's exchange, as the
course's own nbgrader_config.py names it, and the student's folder, student/, where the lab opens: Fetch writes each
assignment there and Submit sends what was saved there.  Nothing of the instructor's configuration (the hidden checks
on PYTHONPATH) reaches the student's server."""
from pathlib import Path

from rlhf_course import exchange
from rlhf_course.exchange.local import STUDENT_FOLDER

COURSE_ROOT = Path(__file__).resolve().parents[2]

c = get_config()  # noqa: F821  (provided by traitlets when it loads this file)
exchange.configure_from_environment(c, COURSE_ROOT)
c.Exchange.assignment_dir = str(COURSE_ROOT / STUDENT_FOLDER)
c.Execute.timeout = 120  # Validate, as the course's grading allows a cell
