"""The course's grading, on nbgrader: ``python -m rlhf_course.grading {release,grade,examples}`` (:mod:`app`).

Imports run one way, top to bottom: the command (``app``) -> the batch (``batch``) -> one submission's
engine (``trusted``: ``intake``, then the ``sandbox`` and its ``sandbox_runner`` over ``protocol``, judged by
``checks`` on ``observe``'s plain observations) -> the writers (``gradebook``, ``feedback``, ``report``,
``export``) -> the leaves: ``results`` (what grading produces, no torch), ``limits``, ``settings`` (the
configuration and the course directory), ``notebooks``, ``safe_html``, ``spreadsheet`` (every CSV cell,
the exchange's collect report's too).
"""
