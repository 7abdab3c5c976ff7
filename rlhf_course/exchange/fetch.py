"""A student's commands that only read the exchange (fetch_assignment, fetch_feedback, list): a root they
may read and traverse is enough (stock nbgrader insists on one they can write)."""
from __future__ import annotations

from nbgrader.exchange.default import ExchangeFetchAssignment, ExchangeFetchFeedback, ExchangeList

from rlhf_course.exchange.base import TraversableRoot


class StrictExchangeFetchAssignment(TraversableRoot, ExchangeFetchAssignment):
    pass


class StrictExchangeFetchFeedback(TraversableRoot, ExchangeFetchFeedback):
    pass


class StrictExchangeList(TraversableRoot, ExchangeList):
    pass
