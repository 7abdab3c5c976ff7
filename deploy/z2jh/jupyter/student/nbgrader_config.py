"""The students' nbgrader configuration in the course's single-user image (deploy/z2jh): the shared
exchange, mounted at the same root in every pod (config.yaml), with the course's strict exchange classes."""
import os

from rlhf_course import exchange

exchange.configure(get_config(), os.environ.get("RLHF_EXCHANGE_ROOT", "/srv/nbgrader/exchange"),  # noqa: F821
                   os.environ.get("RLHF_COURSE_ID", "rlhf-course"))
