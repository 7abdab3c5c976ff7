"""Several nbgrader (and ``python -m rlhf_course.grading``) commands of one Unix user in one process of theirs.

Each command still runs as that user, in their environment (nothing of root's), in its own folder, with its own
configuration read anew (nbgrader's app is reset between commands, as its own tests do): what it can read or write
is the user's.  What it does not have is a fresh interpreter: a test where the process boundary is the property
runs the command through :meth:`rlhf_course.classroom.accounts.User.nbgrader` instead.  JupyterLab's Assignment
List runs the same commands in one long-lived server process, so one process for many commands is also how
students meet them.
"""
from __future__ import annotations

import dataclasses
import getpass
import json
import os
import subprocess
import sys
from pathlib import Path

from rlhf_course.classroom.accounts import User

WORKER = (Path(__file__).with_name("command_worker.py")).read_text()


class CommandSession:
    """``with CommandSession(user) as session: session.nbgrader("submit", "rlhf")``: like ``user.nbgrader``, the
    result a :class:`subprocess.CompletedProcess` whose stdout holds stdout and stderr together (stderr is "")."""

    def __init__(self, user: User):
        self.user = user
        self.process: subprocess.Popen | None = None

    def _start(self) -> subprocess.Popen:
        return subprocess.Popen(self.user.command(self.user.server.python, "-c", WORKER),
                                cwd=self.user.home, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)

    def __enter__(self) -> "CommandSession":
        self.process = self._start()
        return self

    def __exit__(self, *exc) -> None:
        self.process.stdin.close()
        self.process.wait(timeout=60)

    def _run(self, program: str, args: tuple[str, ...], cwd: Path | None, env: dict | None,
             check: bool) -> subprocess.CompletedProcess:
        request = {"program": program, "argv": list(args), "cwd": str(cwd or self.user.home), "env": env or {}}
        self.process.stdin.write(json.dumps(request) + "\n")
        self.process.stdin.flush()
        line = self.process.stdout.readline()
        if not line:
            raise AssertionError(f"{self.user.name}'s command process ended ({self.process.wait()}) during "
                                 f"{program} {' '.join(args)}:\n{self.process.stderr.read()[-3000:]}")
        reply = json.loads(line)
        result = subprocess.CompletedProcess([program, *args], reply["returncode"], reply["output"], "")
        if check and result.returncode != 0:
            raise AssertionError(f"{self.user.name}: {program} {' '.join(args)} failed ({result.returncode})\n"
                                 f"{result.stdout[-3000:]}")
        return result

    def nbgrader(self, *args: str, cwd: Path | None = None, env: dict | None = None,
                 check: bool = True) -> subprocess.CompletedProcess:
        return self._run("nbgrader", args, cwd, env, check)

    def course_command(self, *args: str, cwd: Path | None = None, env: dict | None = None,
                       check: bool = True) -> subprocess.CompletedProcess:
        """``python -m rlhf_course.grading ARGS`` (its ``main``)."""
        return self._run("rlhf_course.grading", args, cwd, env, check)


class OwnCommandSession(CommandSession):
    """A :class:`CommandSession` of this test's own user in this interpreter's environment (as
    :func:`rlhf_course.grading.release.nbgrader` runs one command): for tests whose commands are all this user's
    and where no process boundary is what is tested.  ``folder``: where a command runs unless given ``cwd``."""

    @dataclasses.dataclass
    class _Here:
        name: str
        home: Path

    def __init__(self, folder: Path):
        super().__init__(self._Here(getpass.getuser(), folder))

    def _start(self) -> subprocess.Popen:
        env = dict(os.environ)
        env["PATH"] = str(Path(sys.executable).parent) + os.pathsep + env.get("PATH", "")
        return subprocess.Popen([sys.executable, "-c", WORKER], cwd=self.user.home, env=env, stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
