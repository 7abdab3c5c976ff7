"""Every name a student made (an inbound entry's name: their id, the assignment, the time) is printed by the
course's nbgrader apps through one rule (``results.printable``): terminal escapes never reach the instructor's
terminal.  Tested with the instructor's own ``nbgrader list --inbound`` in a course configured as usual."""
from __future__ import annotations

import logging
import os
import subprocess
import sys


from tests.support.course import copy_course

COURSE = "rlhf-course"
# Retitle the terminal, move the cursor up, erase the line, ring the bell: what the red team put in an entry name.
ESCAPES = "\x1b]0;owned\x07\x1b[1A\x1b[2K\x1b[31m"


def test_an_entry_name_with_terminal_escapes_is_listed_printable(tmp_path):
    course = copy_course(tmp_path / "course")
    inbound = tmp_path / "exchange" / COURSE / "inbound"
    entry = inbound / f"mallory{ESCAPES}+rlhf{ESCAPES}+2026-12-01 10:00:00.000000 UTC+abc"
    entry.mkdir(parents=True)
    (entry / "rlhf_building_blocks.ipynb").write_text("{}")
    env = dict(os.environ, RLHF_EXCHANGE_ROOT=str(tmp_path / "exchange"), RLHF_COURSE_ID=COURSE)
    listed = subprocess.run([sys.executable, "-m", "nbgrader", "list", "--inbound"], cwd=course, env=env,
                            capture_output=True, text=True, timeout=120)
    output = listed.stdout + listed.stderr
    assert listed.returncode == 0, output
    assert "mallory?]0;owned??[1A?[2K?[31m rlhf?]0;owned" in output, output
    assert not any(ch in output for ch in "\x1b\x07\x9b"), repr(output)


def test_the_filter_makes_each_record_printable_message_and_traceback():
    from rlhf_course.exchange.base import PrintableRecords
    lines = []
    handler = logging.Handler()
    handler.emit = lambda record: lines.append(logging.Formatter().format(record))
    log = logging.getLogger("test-printable-records")
    log.addHandler(handler)
    log.addFilter(PrintableRecords())
    log.propagate = False
    log.warning("No notebooks found in %s", f"inbound/bob{ESCAPES}")
    try:
        raise RuntimeError(f"Could not match 'bob{ESCAPES}'")
    except RuntimeError:
        log.exception("failed")
    assert lines[0] == "No notebooks found in inbound/bob?]0;owned??[1A?[2K?[31m"
    assert "Could not match 'bob?]0;owned" in lines[1] and "\x1b" not in lines[1]
