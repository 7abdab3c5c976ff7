"""One cell of a CSV file an instructor may open in a spreadsheet, made inert.

A spreadsheet reads a cell beginning with ``=``, ``+``, ``-`` or ``@`` (or a tab or carriage return
before one) as a formula: an entry name, a student id or a message a student shaped could then
compute, fetch a URL or link anywhere once the report is opened.  Every CSV writer of the course
(``collect_report.csv``, ``grading_report.csv``, ``grades.csv`` and ``nbgrader export``) passes each
cell through :func:`cell`.  No imports: the exchange and every writer load it without the grader.
"""
from __future__ import annotations

FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def cell(value):
    """A text value beginning like a formula gets a leading ``'`` (OWASP's rule), which spreadsheets
    show as text; every other value is returned as is.  Numbers stay numbers: a score we computed is a
    number, even a negative one, and only text can carry a formula.  Text that merely looks like a
    number (``"-2"``) is quoted too, since text is where a student's words end up."""
    if isinstance(value, str) and value.startswith(FORMULA_STARTS):
        return "'" + value
    return value


def row(values) -> list:
    """Every cell of one CSV row through :func:`cell`."""
    return [cell(value) for value in values]
