"""Real Unix users (an instructor and two students), created by the tests as root."""
import grp
import os
import pwd
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

PREFIX = "rlhft"
INSTRUCTORS = f"{PREFIX}_instructors"


class User:
    def __init__(self, name: str, home: Path):
        self.name, self.home = name, home
        entry = pwd.getpwnam(name)
        self.uid, self.gid = entry.pw_uid, entry.pw_gid

    def run(self, *args: str, cwd: Path | None = None, env: dict | None = None,
            check: bool = True) -> subprocess.CompletedProcess:
        """Run a command as this user.  The venv's interpreter lives under /root (mode 0700), so
        the command sees a /root holding only the Python installation; nothing else changes."""
        bin_dir = str(Path(sys.executable).parent)
        environment = {"HOME": str(self.home), "USER": self.name, "PATH": f"{bin_dir}:/usr/bin:/bin",
                       "LANG": "C.UTF-8", **(env or {})}
        python_home = _python_home()
        command = ["bwrap", "--bind", "/", "/", "--tmpfs", "/root", "--ro-bind", python_home, python_home,
                   "--dev-bind", "/dev", "/dev", "--proc", "/proc", "--die-with-parent",
                   "--chdir", str(cwd or self.home),
                   "setpriv", f"--reuid={self.uid}", f"--regid={self.gid}", "--init-groups",
                   "env", "-i", *[f"{k}={v}" for k, v in environment.items()], *args]
        proc = subprocess.run(command, capture_output=True, text=True)
        if check and proc.returncode != 0:
            raise AssertionError(f"{self.name}: {' '.join(args)} failed ({proc.returncode})\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
        return proc

    def python(self, code: str, **kwargs) -> subprocess.CompletedProcess:
        return self.run(sys.executable, "-c", code, **kwargs)

    def nbgrader(self, *args: str, **kwargs) -> subprocess.CompletedProcess:
        return self.run(sys.executable, "-m", "nbgrader", *args, **kwargs)


def _python_home() -> str:
    """The top folder of the Python installation below /root (e.g. /root/.pyenv), or the prefix."""
    prefix = Path(sys.base_prefix)
    if prefix.is_relative_to("/root"):
        return str(Path("/root") / prefix.relative_to("/root").parts[0])
    return str(prefix)


@pytest.fixture(scope="module")
def people():
    if os.geteuid() != 0 or not shutil.which("bwrap") or not shutil.which("useradd"):
        if os.environ.get("CI"):
            pytest.fail("the exchange test needs root, bubblewrap and useradd")
        pytest.skip("the exchange test needs root, bubblewrap and useradd")
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
        users[role] = User(name, home)
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
