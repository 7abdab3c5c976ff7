"""The classroom's Unix accounts (`make hub` and the multi-user tests): made with a home of their own,
removed with every process they left, and commands run as one of them from the server's Python
environment (:mod:`rlhf_course.classroom.server_env`), with nothing of root's environment."""
from __future__ import annotations

import contextlib
import grp
import os
import pwd
import shutil
import subprocess
import time
from pathlib import Path

from rlhf_course.classroom.server_env import ServerEnv

SHARED_MEMORY = Path("/dev/shm")  # tmpfs: its files are memory, kept after their writer exits
SYSV_IPC = Path("/proc/sysvipc")  # the System V IPC objects, each kept until removed: shm, msg, sem
IPCRM_OPTION = {"shm": "-m", "msg": "-q", "sem": "-s"}


class User:
    """A Unix account, and commands run as it in the server's environment (nothing of root's)."""

    def __init__(self, name: str, home: Path, server: ServerEnv):
        self.name, self.home, self.server = name, home, server
        entry = pwd.getpwnam(name)
        self.uid, self.gid = entry.pw_uid, entry.pw_gid

    def command(self, *args: str, env: dict | None = None) -> list[str]:
        """``args`` as a command line that runs them as this user, with only a user's environment and ``env``."""
        environment = {"HOME": str(self.home), "USER": self.name, "PATH": self.server.path,
                       "LANG": "C.UTF-8", **(env or {})}
        return ["setpriv", f"--reuid={self.uid}", f"--regid={self.gid}", "--init-groups",
                "env", "-i", *[f"{k}={v}" for k, v in environment.items()], *args]

    def run(self, *args: str, cwd: Path | None = None, env: dict | None = None,
            check: bool = True) -> subprocess.CompletedProcess:
        proc = subprocess.run(self.command(*args, env=env), cwd=cwd or self.home, capture_output=True, text=True)
        if check and proc.returncode != 0:
            raise AssertionError(f"{self.name}: {' '.join(args)} failed ({proc.returncode})\n"
                                 f"{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
        return proc

    def python(self, code: str, **kwargs) -> subprocess.CompletedProcess:
        return self.run(self.server.python, "-c", code, **kwargs)

    def nbgrader(self, *args: str, **kwargs) -> subprocess.CompletedProcess:
        return self.run(self.server.python, "-m", "nbgrader", *args, **kwargs)


def add_account(name: str, home: Path, group: str | None = None) -> None:
    """A Unix account with its home (0700); its primary group `group`, or its own."""
    home.parent.mkdir(parents=True, exist_ok=True)
    primary = ["-g", group] if group else ["-U"]
    subprocess.run(["useradd", "-m", "-d", str(home), "-s", "/bin/sh", *primary, name], check=True,
                   capture_output=True)
    home.chmod(0o700)


def live_processes(uids: set[int]) -> list[int]:
    """The pids of the processes running as one of ``uids`` (effective uid), zombies left out: they are gone, and
    only their parent's wait() removes their entry."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError, KeyError, IndexError, ValueError):
                fields = dict(line.split(":", 1) for line in (entry / "status").read_text().splitlines())
                if int(fields["Uid"].split()[1]) in uids and not fields["State"].split()[0] == "Z":
                    found.append(int(entry.name))
    return found


def stop_processes(names, grace: float = 10) -> None:
    """Every process of these accounts stopped, the accounts and their files kept: SIGTERM (a server saves and
    shuts its kernels down), then SIGKILL for what still runs after ``grace`` seconds."""
    names = list(names)
    for name in names:
        subprocess.run(["pkill", "-TERM", "-u", name], capture_output=True)
    uids = set()
    for name in names:
        with contextlib.suppress(KeyError):
            uids.add(pwd.getpwnam(name).pw_uid)
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline and live_processes(uids):
        time.sleep(0.1)
    for name in names:
        subprocess.run(["pkill", "-KILL", "-u", name], capture_output=True)


def sysv_ipc_objects(uid: int, tables: Path = SYSV_IPC) -> list[tuple[str, int]]:
    """The System V shared memory segments, message queues and semaphore sets ``uid`` owns or made, as
    (``shm``/``msg``/``sem``, id)."""
    found = []
    for kind in IPCRM_OPTION:
        with contextlib.suppress(OSError):
            header, *rows = (tables / kind).read_text().splitlines()
            names = header.split()
            for row in rows:
                fields = dict(zip(names, row.split()))
                if uid in (int(fields["uid"]), int(fields["cuid"])):
                    found.append((kind, int(fields[names[1]])))  # shmid, msqid or semid
    return found


def release_left_memory(uid: int, shared_memory: Path = SHARED_MEMORY, tables: Path = SYSV_IPC) -> list[str]:
    """What the account ``uid`` keeps in the machine's memory with no process left: its files in ``shared_memory``
    (/dev/shm, a tmpfs) and its System V IPC objects, removed, as systemd-logind's RemoveIPC does when a user's last
    session ends; nothing while any process of the account runs (a session outside its server's cgroup).  What
    was removed."""
    if live_processes({uid}):
        return []
    removed = []
    with contextlib.suppress(FileNotFoundError), os.scandir(shared_memory) as entries:
        for entry in entries:
            with contextlib.suppress(FileNotFoundError):
                if entry.stat(follow_symlinks=False).st_uid != uid:
                    continue
                if entry.is_dir(follow_symlinks=False):
                    shutil.rmtree(entry.path)
                else:
                    os.unlink(entry.path)
                removed.append(entry.path)
    for kind, number in sysv_ipc_objects(uid, tables):
        if subprocess.run(["ipcrm", IPCRM_OPTION[kind], str(number)], capture_output=True).returncode == 0:
            removed.append(f"System V {kind} {number}")
    return removed


def remove_accounts(names, group: str | None = None) -> None:
    """Stop every process of these accounts, delete them (homes included), what they left in memory
    (:func:`release_left_memory`: an account's /dev/shm files outlive it) and the group."""
    for name in names:
        uid = None
        with contextlib.suppress(KeyError):
            uid = pwd.getpwnam(name).pw_uid
        # userdel refuses an account with a live process, and SIGKILLed processes take a moment to go
        for _ in range(20):
            subprocess.run(["pkill", "-KILL", "-u", name], capture_output=True)
            if subprocess.run(["userdel", "-r", name], capture_output=True).returncode in (0, 6):  # 6: no such user
                break
            time.sleep(0.5)
        if uid is not None:
            release_left_memory(uid)
    if group:
        try:
            grp.getgrnam(group)
            subprocess.run(["groupdel", group], capture_output=True)
        except KeyError:
            pass
