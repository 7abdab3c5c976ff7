"""The program a :class:`tests.support.command_session.CommandSession` runs as one Unix user: nbgrader's and the
course's commands, one after another in this one process, as nbgrader's own tests run them
(``nbgrader.tests.run_nbgrader``: the app initialised, started, then ``reset()``).  Each command pays nbgrader's
import (about 0.8 CPU-s) once per user instead of once per command.

It is sent to the user's Python with ``-c`` (the users cannot read the checkout).  Requests come on stdin, one JSON
object a line: ``{"program": "nbgrader" | "rlhf_course.grading", "argv": [...], "cwd": "...", "env": {...}}``; each
reply is one JSON line on the original stdout: ``{"returncode": int, "output": str}`` (what the command wrote on
stdout and stderr, its log included, in the order written; its subprocesses' too: the descriptors themselves are
redirected)."""
import json
import os
import sys
import tempfile
import traceback


def run_nbgrader(argv: list[str]) -> int:
    from jupyter_core.application import NoStart
    from nbgrader.apps.nbgraderapp import NbGraderApp
    app = NbGraderApp.instance()
    try:
        app.initialize(argv)
        app.start()
    except NoStart:  # how a Jupyter application ends after its subcommand's start: success
        return 0
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else 1
    finally:
        app.reset()  # its subapps, log handlers and singleton: the next command starts from nothing
    return 0


def run_course_command(argv: list[str]) -> int:
    from rlhf_course.grading.app import main  # makes its applications anew each time
    return main(argv)


PROGRAMS = {"nbgrader": run_nbgrader, "rlhf_course.grading": run_course_command}


def ask_alembic_once() -> None:
    """A new gradebook asks ``alembic heads`` (a Python subprocess, about a CPU-second) for the schema version it
    records; the answer is the installed nbgrader's, the same for every command of this process, so the first new
    gradebook asks and the others reuse its answer (tests/conftest.py does the same in the test processes)."""
    import functools
    import nbgrader.api
    nbgrader.api.get_alembic_version = functools.cache(nbgrader.api.get_alembic_version)


def serve(requests, replies) -> None:
    ask_alembic_once()
    base_env = dict(os.environ)
    quiet = os.open(os.devnull, os.O_WRONLY)
    for line in requests:
        request = json.loads(line)
        os.environ.clear()
        os.environ.update(base_env, **request.get("env", {}))
        os.chdir(request["cwd"])
        with tempfile.TemporaryFile() as output:
            sys.stdout.flush(), sys.stderr.flush()
            os.dup2(output.fileno(), 1), os.dup2(output.fileno(), 2)
            try:
                code = PROGRAMS[request["program"]](request["argv"])
            except BaseException:  # a crash is the command's failure, reported like a process's
                traceback.print_exc()
                code = 1
            finally:
                sys.stdout.flush(), sys.stderr.flush()
                os.dup2(quiet, 1), os.dup2(quiet, 2)
            output.seek(0)
            text = output.read().decode(errors="replace")
        replies.write(json.dumps({"returncode": code, "output": text}) + "\n")
        replies.flush()


if __name__ == "__main__":
    serve(sys.stdin, os.fdopen(os.dup(1), "w"))
