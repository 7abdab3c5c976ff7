"""The students' nbgrader configuration in the course's single-user image (deploy/z2jh): the shared
exchange, mounted at the same root in every pod (config.yaml), with the course's strict exchange classes; and
Validate's waits, as on the one-machine hub (a busy node must not tell a student their notebook is broken)."""
import os

from rlhf_course import exchange
from rlhf_course.classroom.hub import VALIDATE_BLOCKED_SECONDS, VALIDATE_CPU_SECONDS, VALIDATE_SECONDS

c = get_config()  # noqa: F821
exchange.configure(c, os.environ.get("RLHF_EXCHANGE_ROOT", "/srv/nbgrader/exchange"),
                   os.environ.get("RLHF_COURSE_ID", "rlhf-course"))
c.Execute.timeout = VALIDATE_SECONDS
c.Execute.iopub_timeout = VALIDATE_SECONDS
c.Execute.startup_timeout = VALIDATE_SECONDS
c.PatientExecute.cpu_seconds = VALIDATE_CPU_SECONDS  # the Validate button's limits (the course's server extension)
c.PatientExecute.blocked_seconds = VALIDATE_BLOCKED_SECONDS
