"""Real Unix users (an instructor and two students), created by the tests as root, who run
nbgrader from the server's Python environment (server_env.py), never from the checkout."""
import grp
import os
import pwd
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from rlhf_course.server_env import ServerEnv

PREFIX = "rlhft"
INSTRUCTORS = f"{PREFIX}_instructors"


class User:
    def __init__(self, name: str, home: Path, server: ServerEnv):
        self.name, self.home, self.server = name, home, server
        entry = pwd.getpwnam(name)
        self.uid, self.gid = entry.pw_uid, entry.pw_gid

    def run(self, *args: str, cwd: Path | None = None, env: dict | None = None,
            check: bool = True) -> subprocess.CompletedProcess:
        """Run a command as this user, in the server's environment (nothing of root's or the checkout's)."""
        environment = {"HOME": str(self.home), "USER": self.name, "PATH": self.server.path,
                       "LANG": "C.UTF-8", **(env or {})}
        command = ["setpriv", f"--reuid={self.uid}", f"--regid={self.gid}", "--init-groups",
                   "env", "-i", *[f"{k}={v}" for k, v in environment.items()], *args]
        proc = subprocess.run(command, cwd=cwd or self.home, capture_output=True, text=True)
        if check and proc.returncode != 0:
            raise AssertionError(f"{self.name}: {' '.join(args)} failed ({proc.returncode})\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
        return proc

    def python(self, code: str, **kwargs) -> subprocess.CompletedProcess:
        return self.run(self.server.python, "-c", code, **kwargs)

    def nbgrader(self, *args: str, **kwargs) -> subprocess.CompletedProcess:
        return self.run(self.server.python, "-m", "nbgrader", *args, **kwargs)


def _needs_root():
    if os.geteuid() != 0 or not shutil.which("setpriv") or not shutil.which("useradd"):
        if os.environ.get("CI"):
            pytest.fail("the exchange test needs root, setpriv and useradd")
        pytest.skip("the exchange test needs root, setpriv and useradd")


@pytest.fixture(scope="session")
def server(repo):
    """The server's Python environment, which every simulated user can run (see server_env.py)."""
    _needs_root()
    env = ServerEnv(repo)
    yield env
    env.remove()


@pytest.fixture(scope="module")
def people(server):
    _needs_root()
    base = Path(tempfile.mkdtemp(prefix="rlhf-exchange-test-"))
    base.chmod(0o755)
    names = {"instructor": f"{PREFIX}_instr", "alice": f"{PREFIX}_alice", "bob": f"{PREFIX}_bob"}
    _cleanup(names)
    subprocess.run(["groupadd", INSTRUCTORS], check=True)
    users = {}
    for role, name in names.items():
        home = base / "home" / name
        home.parent.mkdir(exist_ok=True)
        group = ["-g", INSTRUCTORS] if role == "instructor" else ["-U"]
        subprocess.run(["useradd", "-m", "-d", str(home), "-s", "/bin/sh", *group, name], check=True)
        home.chmod(0o700)
        users[role] = User(name, home, server)
    users["base"] = base
    yield users
    _cleanup(names)
    shutil.rmtree(base, ignore_errors=True)


def _cleanup(names):
    for name in names.values():
        subprocess.run(["pkill", "-u", name], capture_output=True)
        subprocess.run(["userdel", "-r", name], capture_output=True)
    try:
        grp.getgrnam(INSTRUCTORS)
        subprocess.run(["groupdel", INSTRUCTORS], capture_output=True)
    except KeyError:
        pass
