"""Runs INSIDE an outer sandbox, as root: the *zygote*, a parent with torch already imported that forks
one fresh, isolated sandbox per submission.  It never runs student code and never reads what a sandbox
sends: the sandbox's pipes go straight to the grader.

    python -m rlhf_course.grading.sandbox.zygote      (started by :mod:`sandbox`, one per grading process)

The outer sandbox (bwrap, :func:`rlhf_course.grading.sandbox.sandbox.zygote_command`) gives the zygote the
view every submission gets: a read-only system, the Python environment and this package, no course
directory, no network.  It keeps root and the few capabilities needed to build, for each submission, a
process that is PID 1 of a new PID namespace (so that everything the submission leaves running dies
with it) and, before any student code exists in it,

* leaves every other namespace the submissions could share: new mount, network, IPC and UTS namespaces;
* mounts fresh size-limited tmpfs folders on ``/submission`` and ``/tmp`` (the only places it may
  write), a new ``/dev/pts`` and its own ``/proc`` (nothing an earlier submission wrote or started is there);
* enters its slot's cgroups, then drops its view of them (the bound cgroup folders unmounted, a new
  cgroup namespace);
* takes the rlimits, a new session, the slot's unprivileged uid, empty capability sets (bounding,
  inheritable and ambient too) and ``no_new_privs``, empties the uid's kernel keyrings (kept per uid, not
  per namespace: the previous sandbox of the slot may have left keys there), installs the seccomp filter
  (:mod:`seccomp`: no namespaces, mounts, keyrings, bpf, perf, userfaultfd, io_uring or ptrace from here on),
  keeps only the three pipes the grader passed (every other descriptor is closed) and runs
  :func:`rlhf_course.grading.sandbox.sandbox_runner.main`.  Its ``/proc/key-users`` and ``/proc/keys`` are empty files.

The zygote hands the grader a pidfd of that process (to see it end and to kill it).  The sandbox cannot
see the zygote (another PID namespace), signal or trace it, and holds no descriptor of it.  Everything a
submission imports, patches or leaves in memory lives in its own forked copy: the next submission forks
from the zygote again.

Requests (grader -> zygote) are JSON records on a ``SOCK_SEQPACKET`` socket, the three pipes attached
(``SCM_RIGHTS``); each reply is ``{"ok": true}`` with the pidfd attached, or ``{"error": ...}``.
"""
from __future__ import annotations

import ctypes
import importlib
import json
import os
import random
import resource
import signal
import socket
import sys
import traceback

from rlhf_course.grading.sandbox import seccomp

CLONE_NEWNS, CLONE_NEWCGROUP, CLONE_NEWUTS = 0x00020000, 0x02000000, 0x04000000
CLONE_NEWIPC, CLONE_NEWPID, CLONE_NEWNET = 0x08000000, 0x20000000, 0x40000000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 32, 4096, 16384, 1 << 18
MNT_DETACH = 2
PR_SET_PDEATHSIG, PR_SET_DUMPABLE, PR_CAPBSET_DROP = 1, 4, 24
PR_SET_NO_NEW_PRIVS, PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL = 38, 47, 4
LINUX_CAPABILITY_VERSION_3 = 0x20080522
CGROUP_MOUNTS = "/run/rlhf-cgroup"  # the grading cgroups (a folder per hierarchy), unmounted in every sandbox
FONT_MOUNTS = "/opt/rlhf-grader-fonts"  # the prebuilt matplotlib font list, bound read-only into each /tmp/matplotlib
# Read-only folders of the view that lie under /tmp (an environment in a checkout under /tmp, as CI clones one):
# a sandbox's fresh /tmp would hide them, so the zygote also has each at KEPT_MOUNTS/<i> and every sandbox binds
# it back at its path (RLHF_ZYGOTE_KEPT: a JSON list of those paths, in that order).
KEPT_MOUNTS = "/opt/rlhf-grader-kept"
KEPT_ENV = "RLHF_ZYGOTE_KEPT"
_KEPT: list[str] = []
# What the zygote keeps (by number): namespaces and mounts (SYS_ADMIN), the slot's uid and no groups (SETUID,
# SETGID), emptying a sandbox's bounding set (SETPCAP).  Its sandboxes keep none.
CAPABILITIES = {"CAP_SETGID": 6, "CAP_SETUID": 7, "CAP_SETPCAP": 8, "CAP_SYS_ADMIN": 21}
# Kernel keyrings are per uid, not per namespace: the slot's uid finds what the previous sandbox left there.
KEYCTL = {"x86_64": 250, "aarch64": 219, "i686": 288, "armv7l": 311}  # keyctl(2)'s system call number
KEYCTL_JOIN_SESSION_KEYRING, KEYCTL_CLEAR, KEYCTL_UNLINK, KEYCTL_GET_PERSISTENT = 1, 7, 9, 22
KEY_SPEC_SESSION_KEYRING, KEY_SPEC_USER_KEYRING, KEY_SPEC_USER_SESSION_KEYRING = -3, -4, -5
# Kernel-wide key accounting every uid can read: /proc/key-users lists each uid's key counts (the other slots'
# sandboxes', a channel between concurrent sandboxes), /proc/keys the keys the reader may view.  Each is an
# empty file in a sandbox.
MASKED_PROC_FILES = ("key-users", "keys")
REQUEST_FIELDS = {"slot": int, "uid": int, "workspace_bytes": int, "memory_bytes": int, "cpu_seconds": int, "file_bytes": int,
                  "processes": int}

_libc = ctypes.CDLL(None, use_errno=True)
_libc.mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_char_p]
_libc.umount2.argtypes = [ctypes.c_char_p, ctypes.c_int]
_libc.unshare.argtypes = [ctypes.c_int]
_libc.setns.argtypes = [ctypes.c_int, ctypes.c_int]
_libc.prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32), ("inheritable", ctypes.c_uint32)]


def _check(result: int, what: str) -> None:
    if result != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def _mount(source: str | None, target: str, fstype: str | None, flags: int, data: str | None = None) -> None:
    _check(_libc.mount(source.encode() if source else None, target.encode(), fstype.encode() if fstype else None,
                       flags, data.encode() if data else None), f"mount {target}")


def _bind_read_only(source: str, target: str) -> None:
    _mount(source, target, None, MS_BIND)
    _mount(None, target, None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV)


def _prctl(option: int, value: int = 0) -> None:
    _check(_libc.prctl(option, value, 0, 0, 0), f"prctl {option}")


def _fresh_tmpfs(target: str, size: int, mode: int) -> None:
    _mount("tmpfs", target, "tmpfs", MS_NOSUID | MS_NODEV, f"size={size},mode={mode:o}")


def _forget_keys() -> None:
    """Empty the uid's kernel keyrings (user, user session, persistent) and join a new session keyring: keys
    are kept per uid across processes, and this uid's previous sandbox may have left some."""
    number = KEYCTL.get(os.uname().machine)
    if number is None:
        return  # an architecture we do not know the number for: the keyrings are not emptied

    def keyctl(*args) -> int:
        return _libc.syscall(number, *(ctypes.c_long(a) for a in args))

    _check(0 if keyctl(KEYCTL_JOIN_SESSION_KEYRING, 0) > 0 else -1, "join a new session keyring")
    for keyring in (KEY_SPEC_USER_KEYRING, KEY_SPEC_USER_SESSION_KEYRING):
        _check(keyctl(KEYCTL_CLEAR, keyring), "clear a keyring")
    persistent = keyctl(KEYCTL_GET_PERSISTENT, -1, KEY_SPEC_SESSION_KEYRING)
    if persistent > 0:  # none where the kernel has no persistent keyrings
        _check(keyctl(KEYCTL_CLEAR, persistent), "clear the persistent keyring")
        keyctl(KEYCTL_UNLINK, persistent, KEY_SPEC_SESSION_KEYRING)


def _last_capability() -> int:
    with open("/proc/sys/kernel/cap_last_cap") as handle:
        return int(handle.read())


# ----------------------------------------------------------------------------- one sandbox

def _sandbox(request: dict, pipes: tuple[int, int, int], last_cap: int) -> None:
    """PID 1 of a new PID namespace: its own namespaces, folders, cgroups and limits, the slot's uid, no privilege."""
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)  # the zygote's reaper is not the supervisor's
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGCHLD})
    _prctl(PR_SET_PDEATHSIG, signal.SIGKILL)  # the zygote gone (the grader gone): so is this sandbox
    for target, fd in zip((0, 1, 2), pipes):
        os.dup2(fd, target)
    os.closerange(3, os.sysconf("SC_OPEN_MAX"))  # the zygote's control socket and every other descriptor it holds
    _check(_libc.unshare(CLONE_NEWNS | CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWUTS), "unshare")
    _mount(None, "/", None, MS_REC | MS_PRIVATE)  # nothing mounted here reaches the zygote's view
    for target in ("/tmp", "/submission", "/dev/pts", "/proc"):  # the zygote's own: replaced, not hidden
        _check(_libc.umount2(target.encode(), MNT_DETACH), f"umount {target}")
    _fresh_tmpfs("/tmp", request["workspace_bytes"], 0o1777)
    _fresh_tmpfs("/submission", request["workspace_bytes"], 0o777)
    for index, path in enumerate(_KEPT):  # the environment's folders under /tmp, back where they were, read-only
        os.makedirs(path, mode=0o755, exist_ok=True)
        _bind_read_only(f"{KEPT_MOUNTS}/{index}", path)
    _mount("devpts", "/dev/pts", "devpts", MS_NOSUID | MS_NOEXEC, "newinstance,ptmxmode=0666,mode=620")
    _mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)  # this PID namespace's processes only
    for name in ("sys", "sysrq-trigger", "irq", "bus"):  # read-only, as bwrap makes them
        if os.path.exists(f"/proc/{name}"):
            _bind_read_only(f"/proc/{name}", f"/proc/{name}")
    for name in MASKED_PROC_FILES:  # /dev/null in their place (a device node: its mount keeps devices)
        if os.path.exists(f"/proc/{name}"):
            _mount("/dev/null", f"/proc/{name}", None, MS_BIND)
            _mount(None, f"/proc/{name}", None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NOEXEC)
    os.mkdir("/tmp/matplotlib")
    os.chmod("/tmp/matplotlib", 0o777)
    for name in sorted(os.listdir(FONT_MOUNTS)):
        open(f"/tmp/matplotlib/{name}", "w").close()
        _bind_read_only(f"{FONT_MOUNTS}/{name}", f"/tmp/matplotlib/{name}")
    hierarchies = sorted(os.listdir(CGROUP_MOUNTS)) if os.path.isdir(CGROUP_MOUNTS) else []
    for name in hierarchies:
        with open(f"{CGROUP_MOUNTS}/{name}/slot-{request['slot']}/cgroup.procs", "w") as handle:
            handle.write("0")  # this process, and so everything it starts, joins the slot's cgroup
    for name in hierarchies:
        _check(_libc.umount2(f"{CGROUP_MOUNTS}/{name}".encode(), MNT_DETACH), "umount a cgroup")
    _check(_libc.unshare(CLONE_NEWCGROUP), "unshare cgroup")
    os.setsid()
    for name, value in (("RLIMIT_AS", request["memory_bytes"]), ("RLIMIT_CPU", request["cpu_seconds"]),
                        ("RLIMIT_FSIZE", request["file_bytes"]), ("RLIMIT_NPROC", request["processes"]),
                        ("RLIMIT_CORE", 0)):
        resource.setrlimit(getattr(resource, name), (value, value))
    os.chdir("/submission")
    uid = request["uid"]
    os.setgroups([])
    os.setresgid(uid, uid, uid)
    for cap in range(last_cap + 1):
        _prctl(PR_CAPBSET_DROP, cap)
    _prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL)
    os.setresuid(uid, uid, uid)  # clears the effective and permitted sets
    header, data = _CapHeader(LINUX_CAPABILITY_VERSION_3, 0), (_CapData * 2)()
    _check(_libc.capset(ctypes.byref(header), data), "capset")  # and the inheritable one
    _prctl(PR_SET_NO_NEW_PRIVS, 1)
    _prctl(PR_SET_PDEATHSIG, signal.SIGKILL)  # again: the uid change cleared it
    _forget_keys()
    seccomp.install()  # last: the steps above use calls it denies (keyctl)
    with open("/proc/self/status") as handle:
        status = dict(line.split(":", 1) for line in handle if ":" in line)
    if os.getresuid() != (uid,) * 3 or os.getgroups() or any(
            int(status[k], 16) for k in ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb")):
        raise RuntimeError("the sandbox kept a privilege")
    if status["Seccomp"].strip() != str(seccomp.SECCOMP_MODE_FILTER):
        raise RuntimeError("the sandbox has no seccomp filter")
    random.seed()  # a fresh process would have drawn its own seed
    if "numpy" in sys.modules:
        sys.modules["numpy"].random.seed()
    from rlhf_course.grading.sandbox import sandbox_runner
    sys.stderr.flush()
    os._exit(sandbox_runner.main())


def spawn(request: dict, pipes: tuple[int, int, int], last_cap: int, own_pid_namespace: int) -> int:
    """Fork one sandbox, PID 1 of a new PID namespace; return a pidfd of it."""
    sys.stderr.flush()
    # No reaping between the fork and the pidfd: the pid must still be this child's.
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGCHLD})
    _check(_libc.unshare(CLONE_NEWPID), "unshare pid")  # for the next child only:
    try:
        pid = os.fork()
        if pid == 0:
            try:
                _sandbox(request, pipes, last_cap)
            except BaseException:  # noqa: BLE001 - tell the grader's log, never return into the zygote
                traceback.print_exc()
                sys.stderr.flush()
            os._exit(70)
    finally:
        _check(_libc.setns(own_pid_namespace, CLONE_NEWPID), "setns pid")  # the zygote's next child is its own again
    try:
        return os.pidfd_open(pid)
    finally:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGCHLD})


# ----------------------------------------------------------------------------- the zygote

def _reap() -> None:
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def _valid(request) -> bool:
    return (isinstance(request, dict) and set(request) == set(REQUEST_FIELDS)
            and all(type(request[k]) is kind for k, kind in REQUEST_FIELDS.items())
            and request["uid"] > 0 and 0 <= request["slot"] < 1 << 16)


def serve(control: socket.socket) -> None:
    last_cap = _last_capability()
    own_pid_namespace = os.open("/proc/self/ns/pid", os.O_RDONLY | os.O_CLOEXEC)
    while True:
        message, fds, _, _ = socket.recv_fds(control, 1 << 16, 3)
        _reap()
        if not message:
            return  # the grader closed the socket: stop
        try:
            request = json.loads(message)
            if not _valid(request) or len(fds) != 3:
                raise ValueError("malformed request")
            pidfd = spawn(request, tuple(fds), last_cap, own_pid_namespace)
            try:
                socket.send_fds(control, [b'{"ok": true}'], [pidfd])
            finally:
                os.close(pidfd)
        except Exception as exc:  # noqa: BLE001 - report, keep serving
            control.send(json.dumps({"error": f"{type(exc).__name__}: {exc}"[:1000]}).encode())
        finally:
            for fd in fds:
                os.close(fd)


# What the course's notebooks import besides torch (each feedback run would import it again otherwise).
NOTEBOOK_MODULES = ("numpy", "rlhf_course.explorers", "rlhf_course.demo", "rlhf_course.lab.grpo",
                    "rlhf_course.floating_point")


def warm_up() -> None:
    """Import once what every sandbox needs (the supervisor's and its children's imports), then freeze
    the garbage collector's view of it, so that forked copies share those pages instead of touching them."""
    import gc

    import torch

    torch.set_num_threads(1)  # no OpenMP pool exists in the zygote to be forked half-alive
    import IPython.core.interactiveshell  # noqa: F401
    import IPython.utils.capture  # noqa: F401

    import rlhf_course.grading.sandbox.observe  # noqa: F401
    import rlhf_course.grading.sandbox.sandbox_runner  # noqa: F401
    import traitlets.config  # noqa: F401
    for name in NOTEBOOK_MODULES:
        try:
            importlib.import_module(name)
        except Exception:  # noqa: BLE001 - a module a course lacks is imported by its notebook, or not at all
            pass
    gc.collect()
    gc.freeze()


def main() -> int:
    import json
    _KEPT[:] = json.loads(os.environ.pop(KEPT_ENV, "[]"))
    control = socket.socket(fileno=os.dup(0))
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    _prctl(PR_SET_DUMPABLE, 0)
    for cap in range(_last_capability() + 1):  # bwrap leaves root's whole bounding set
        if cap not in CAPABILITIES.values():
            _prctl(PR_CAPBSET_DROP, cap)
    _prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL)  # it executes nothing, but bwrap raises them
    # `python -m` puts the working folder ("/") first on sys.path: nothing below / may shadow a module.
    sys.path[:] = [p for p in sys.path if p not in ("", "/", os.getcwd())]
    warm_up()
    # A sandbox that ended is reaped at once: as a zombie it would still count against its uid's processes.
    signal.signal(signal.SIGCHLD, lambda *_: _reap())
    control.send(b'{"ready": true}')
    serve(control)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
