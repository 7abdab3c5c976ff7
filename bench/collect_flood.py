"""collect's cost for a class of honest students plus one student who made thousands of inbound entries.

    sudo python bench/collect_flood.py [--students 40] [--flood 20000] [--code COMMIT]

Needs root: it creates one Unix account per student (``rlhfb_cf<n>``, no home, removed at the end) so that each
entry has the owner its name gives, as on a hub.  Each honest student submits one entry (a notebook of about
60 KB and ``timestamp.txt``, as nbgrader's submit makes); the flooder's ``--flood`` entries (a small notebook each,
their names claiming times in the future, so stock nbgrader would choose one) come before the flooder's own honest
submission.  The course's :class:`StrictExchangeCollect` then collects the assignment in this process (its
``init_src`` and ``copy_files``, as ``nbgrader collect`` calls them); wall and CPU seconds are printed, with
whether each student's honest submission was the one collected.  ``--code COMMIT`` measures that commit's
``rlhf_course/exchange/collect.py`` instead of the checkout's (e.g. the code before the cap on entries examined).
"""
from __future__ import annotations

import argparse
import contextlib
import csv
import importlib.util
import os
import pwd
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

ASSIGNMENT = "ps1"
PREFIX = "rlhfb_cf"
NOTEBOOK = '{"cells": [], "metadata": {}, "nbformat": 4, "nbformat_minor": 5, "padding": "%s"}'


def collect_class(code: str | None):
    """The StrictExchangeCollect class of the checkout, or of collect.py at the commit ``code``."""
    if code is None:
        from rlhf_course.exchange.collect import StrictExchangeCollect
        return StrictExchangeCollect
    source = subprocess.run(["git", "-C", str(REPO), "show", f"{code}:rlhf_course/exchange/collect.py"],
                            capture_output=True, text=True, check=True).stdout
    path = Path(tempfile.mkdtemp(prefix="collect-code-")) / "collect_at_commit.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location("collect_at_commit", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module.StrictExchangeCollect


@contextlib.contextmanager
def accounts(count: int):
    names = [f"{PREFIX}{i:02d}" for i in range(count)]
    try:
        for name in names:
            subprocess.run(["useradd", "-M", "-s", "/usr/sbin/nologin", name], check=True, capture_output=True)
        yield [pwd.getpwnam(name) for name in names]
    finally:
        for name in names:
            subprocess.run(["userdel", name], capture_output=True)


def submit(inbound: Path, user, claimed: str, padding: int) -> None:
    """One entry as nbgrader's submit leaves it, owned by its student."""
    entry = inbound / f"{user.pw_name}+{ASSIGNMENT}+{claimed}"
    entry.mkdir()
    (entry / "answer.ipynb").write_text(NOTEBOOK % ("x" * padding))
    (entry / "timestamp.txt").write_text(claimed)
    for path in (entry, entry / "answer.ipynb", entry / "timestamp.txt"):
        os.chown(path, user.pw_uid, user.pw_gid)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--students", type=int, default=40, help="honest students")
    parser.add_argument("--flood", type=int, default=20_000, help="entries the one more student makes")
    parser.add_argument("--code", help="a commit whose collect.py to measure instead of the checkout's")
    args = parser.parse_args()
    if os.geteuid() != 0:
        sys.exit("needs root (it creates the students' accounts)")
    from nbgrader.api import Gradebook
    from nbgrader.coursedir import CourseDirectory
    collect = collect_class(args.code)
    base = Path(tempfile.mkdtemp(prefix="collect-flood-"))
    try:
        with accounts(args.students + 1) as users:
            inbound = base / "exchange" / "course" / "inbound"
            inbound.mkdir(parents=True)
            flooder = users[-1]
            made = time.monotonic()
            for i in range(args.flood):
                submit(inbound, flooder, f"2099-01-01 00:00:00.{i:06d} UTC", 200)
            for user in users:
                time.sleep(0.01)  # each submission in its own clock tick
                submit(inbound, user, "2026-12-07 12:00:00.000000 UTC", 60_000)
            made = time.monotonic() - made
            root = base / "course"
            root.mkdir()
            coursedir = CourseDirectory(root=str(root), assignment_id=ASSIGNMENT, course_id="course")
            Gradebook(coursedir.db_url, "course").close()  # made once by `make release`, not by each collect
            exchange = collect(coursedir=coursedir, root=str(base / "exchange"))
            exchange.log.setLevel("CRITICAL")  # a flood's log lines would be measured as terminal output
            wall, cpu = time.monotonic(), time.process_time()
            exchange.init_src()
            exchange.copy_files()
            wall, cpu = time.monotonic() - wall, time.process_time() - cpu
            honest = sum(len((root / "submitted" / u.pw_name / ASSIGNMENT / "answer.ipynb").read_text()) > 60_000
                         for u in users)
            with open(root / "collect_report.csv", newline="") as handle:
                rows = list(csv.DictReader(handle))
    finally:
        shutil.rmtree(base, ignore_errors=True)
    print(f"code: {args.code or 'checkout'}; {args.students} honest students + 1 with {args.flood} entries "
          f"(made in {made:.1f} s)")
    print(f"collect: {wall:.2f} s wall, {cpu:.2f} s CPU; {honest} / {args.students + 1} honest submissions "
          f"collected; collect_report.csv {len(rows)} rows")
    for row in rows:
        if row["status"] == "not examined":
            print(f"  {row['student']}: {row['reason']}")


if __name__ == "__main__":
    main()
