"""Text a student made (a submission's output, an inbound entry's name), safe to print: one rule for grading's
terminal lines, CSV cells and pages, and for the exchange's log lines."""
import re

_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def printable(text: str) -> str:
    """Text from a submission, safe for a terminal, a CSV and a page: control characters (ANSI
    escapes included) become '?', line breaks stay."""
    return _CONTROL.sub("?", text or "")
