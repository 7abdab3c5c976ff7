"""What the tests expect of a feedback page: nbconvert's own page, with the course's policy first in <head>."""
from __future__ import annotations

import re


def with_policy(page: str, policy: str) -> str:
    """The page with its Content-Security-Policy ``<meta>`` as the first element of <head> (before any
    script), where the feedback template writes it."""
    meta = f'<meta http-equiv="Content-Security-Policy" content="{policy}">'
    return re.sub(r"<head>", lambda m: m.group(0) + "\n" + meta, page, count=1)
