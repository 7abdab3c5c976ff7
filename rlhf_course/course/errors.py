"""The one base of the errors a person using the course causes, and can mend: a command typed wrong, a course
not ready for it, a stale translation, a date that is no date, a student's entry that is refused.

Its message says what is wrong and what to do next.  The grader's commands print it as ``<command> did not run:
<message>`` and exit 2 (:func:`rlhf_course.grading.app.main`); a notebook shows it to its student.  A failure of
the machine or of the course's own code (a sandbox that died, a page that took too long) is no CourseError.
"""


class CourseError(Exception):
    """An error a user of the course caused; the message names the next step."""
