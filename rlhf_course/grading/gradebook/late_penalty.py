"""The course's late-submission policy, nbgrader's way: a plugin of ``AssignLatePenalties``
(``c.AssignLatePenalties.plugin_class`` in nbgrader_config.py), which stock autograde applies and trusted
grading too (:meth:`rlhf_course.course.settings.Course.late_policy`)."""
from __future__ import annotations

import math

from nbgrader.plugins import LateSubmissionPlugin
from traitlets import Float


class PenaltyPerHour(LateSubmissionPlugin):
    """Points off for every started hour late; no credit after a cutoff."""

    points_per_hour = Float(2.0, help="Points deducted per started hour after the due date").tag(config=True)
    zero_after_hours = Float(72.0, help="No credit when later than this many hours").tag(config=True)

    def late_submission_penalty(self, student_id: str, score: float, total_seconds_late: float) -> float:
        if total_seconds_late <= 0:
            return 0.0
        hours = total_seconds_late / 3600
        if hours > self.zero_after_hours:
            return float(score)
        return float(min(score, math.ceil(hours) * self.points_per_hour))
