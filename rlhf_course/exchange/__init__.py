"""The course's nbgrader exchange: nbgrader's own exchange classes, made strict, plugged in through
nbgrader's configuration (:func:`configure`).

Stock nbgrader 0.9 makes the exchange root world-writable (0777) and every submission folder 0777,
relying on unguessable names; on a shared server one student can then read or overwrite another's
submission once the name leaks.  Here:

* the exchange root stays 0755 (students never write to it);
* inbound is nbgrader's 2733 plus the sticky bit (3733): students can create entries but not list
  them, nor rename or delete anyone else's; new entries take the inbound folder's group (the
  instructors');
* each submission is 0770 for folders and 0640 for files: its student and the instructors' group,
  nobody else;
* collect believes only the kernel: an entry's owner, not its name, says whose it is; it is copied
  without following links, within limits; its time is its latest ctime (StrictExchangeCollect).

One module per side of the exchange, as nbgrader's own commands: :mod:`release` (the instructor hands out
assignments and feedback), :mod:`fetch` (a student's commands that only read it: fetch_assignment,
fetch_feedback, list), :mod:`submit`, :mod:`collect`; :mod:`base` holds the modes and the root every
class shares; :mod:`local` is `make lab`'s exchange on one machine.  The late-submission policy belongs to grading
(:mod:`rlhf_course.grading.gradebook.late_penalty`).
"""
import os
from pathlib import Path

LOCAL_FOLDER = "exchange"  # a course's own exchange, in its folder, unless RLHF_EXCHANGE_ROOT names another
DEFAULT_COURSE_ID = "rlhf-course"


def configure(c, exchange_root: str, course_id: str) -> None:
    """The exchange settings a course needs, for nbgrader_config.py (instructor) and for the students'
    (:func:`rlhf_course.classroom.config.student`, which calls this).  Imports nothing:
    nbgrader imports each class when its command runs."""
    # Every app's console handler prints through one rule (base.PrintableRecords): names a student made reach
    # nbgrader's own messages (an inbound entry's name in `nbgrader list --inbound`).
    c.Application.logging_config = {"filters": {"printable": {"()": "rlhf_course.exchange.base.PrintableRecords"}},
                                    "handlers": {"console": {"filters": ["printable"]}}}
    c.Exchange.root = exchange_root
    c.CourseDirectory.course_id = course_id
    c.ExchangeFactory.release_assignment = "rlhf_course.exchange.release.StrictExchangeReleaseAssignment"
    c.ExchangeFactory.release_feedback = "rlhf_course.exchange.release.StrictExchangeReleaseFeedback"
    c.ExchangeFactory.fetch_assignment = "rlhf_course.exchange.fetch.StrictExchangeFetchAssignment"
    c.ExchangeFactory.fetch_feedback = "rlhf_course.exchange.fetch.StrictExchangeFetchFeedback"
    c.ExchangeFactory.list = "rlhf_course.exchange.fetch.StrictExchangeList"
    c.ExchangeFactory.submit = "rlhf_course.exchange.submit.StrictExchangeSubmit"
    c.ExchangeFactory.collect = "rlhf_course.exchange.collect.StrictExchangeCollect"


def from_environment(course_root) -> tuple[str, str]:
    """(exchange root, course id) for :func:`configure`: the exchange ``RLHF_EXCHANGE_ROOT`` names (a JupyterHub's,
    e.g. /srv/nbgrader/exchange), else the course's own ``exchange/`` folder in ``course_root``, and the course id
    ``RLHF_COURSE_ID`` or rlhf-course: the course's nbgrader_config.py and `make lab`'s
    (jupyter/student/nbgrader_config.py) alike."""
    return (os.environ.get("RLHF_EXCHANGE_ROOT", str(Path(course_root) / LOCAL_FOLDER)),
            os.environ.get("RLHF_COURSE_ID", DEFAULT_COURSE_ID))
