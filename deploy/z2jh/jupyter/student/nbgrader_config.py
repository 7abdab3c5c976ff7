"""The students' nbgrader configuration in the course's single-user image (deploy/z2jh): the shared
exchange, mounted at the same root in every pod (config.yaml), with the course's strict exchange classes; and
Validate's waits, as on the one-machine hub (a busy node must not tell a student their notebook is broken).
Everything comes from rlhf_course/classroom/config.py, which imports nothing of the hub."""
import os

from rlhf_course.classroom import config

config.student(get_config(), os.environ.get("RLHF_EXCHANGE_ROOT", "/srv/nbgrader/exchange"),  # noqa: F821
               os.environ.get("RLHF_COURSE_ID", "rlhf-course"))
