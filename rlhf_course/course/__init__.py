"""The course model: what a course is, below everything that grades, hands out or teaches it.

:mod:`settings` (``Course``: the course's folder and its nbgrader configuration, ``c.RlhfCourse``), :mod:`limits`
(every limit of trusted grading), :mod:`dates` (a date as an instructor types it), :mod:`due_dates` (a configured
due date, into the gradebook), :mod:`editions` (an assignment's language editions), :mod:`notebooks` (reading and
writing an assignment's notebooks), :mod:`release_manifest` (what `make release` generated) and :mod:`private_files`
(who else could read the solutions and hidden tests).  It imports nothing of grading, the exchange or the
classroom.
"""
