"""Real Unix users (an instructor and four students), created by the tests as root (the accounts of
rlhf_course/classroom/accounts.py, as `make hub` creates them), who run nbgrader from the server's Python
environment (rlhf_course/classroom/server_env.py), never from the checkout."""
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from rlhf_course.classroom.accounts import User, add_account, remove_accounts
from rlhf_course.classroom.server_env import ServerEnv

from tests.support.accounts import INSTRUCTORS, PREFIX


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
    # Alice and Bob are honest (Bob also attacks Alice); Mallory and Grace only attack the collect.
    names = {"instructor": f"{PREFIX}_instr", "alice": f"{PREFIX}_alice", "bob": f"{PREFIX}_bob",
             "mallory": f"{PREFIX}_mallory", "grace": f"{PREFIX}_grace"}
    _cleanup(names)
    subprocess.run(["groupadd", INSTRUCTORS], check=True)
    users = {}
    for role, name in names.items():
        home = base / "home" / name
        add_account(name, home, INSTRUCTORS if role == "instructor" else None)
        users[role] = User(name, home, server)
    users["base"] = base
    yield users
    _cleanup(names)
    shutil.rmtree(base, ignore_errors=True)


def _cleanup(names):
    remove_accounts(names.values(), INSTRUCTORS)
