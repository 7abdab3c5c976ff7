"""``nbgrader db assignment add --duedate`` then ``nbgrader generate_assignment --force``, for several
assignments in one process (run from the course root, as those commands are):

    python -m rlhf_course.grading.generate ASSIGNMENT [ASSIGNMENT ...] [--duedate "2026-12-18 23:59:00 UTC"]

Each nbgrader command spends about 2 s of CPU starting (imports, configuration) before a fraction
of a second of work; a course of three assignments ran six.  Here nbgrader's configuration is
loaded once, exactly as its command line loads it (``nbgrader_config.py`` in the current folder and
Jupyter's config paths), and each step is the same call nbgrader's own command makes: the
gradebook's ``update_or_create_assignment`` and ``NbGraderAPI.generate_assignment`` (the Formgrader's
Generate button).  Exits 1 with nbgrader's log at the first assignment that fails.
"""
from __future__ import annotations

import argparse
import sys


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("assignments", nargs="+")
    parser.add_argument("--duedate", default="", help="recorded in the gradebook first (nbgrader's format)")
    args = parser.parse_args(argv)

    from nbgrader.api import Gradebook
    from nbgrader.apps.api import NbGraderAPI
    from nbgrader.apps.nbgraderapp import NbGraderApp

    app = NbGraderApp()
    app.initialize([])  # the configuration, as `nbgrader <command>` loads it; no command is run
    api = NbGraderAPI(config=app.config)
    for assignment in args.assignments:
        if args.duedate:
            with Gradebook(api.coursedir.db_url, api.coursedir.course_id) as gradebook:
                gradebook.update_or_create_assignment(assignment, duedate=args.duedate)
        result = api.generate_assignment(assignment, force=True, create=True)
        if not result["success"]:
            print(f"nbgrader generate_assignment {assignment} failed:\n{result.get('log', '')}\n"
                  f"{result.get('error', '')}", file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
