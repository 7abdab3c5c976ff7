"""What student code can see and do inside the sandbox, checked from the inside."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from rlhf_course.course.limits import Limits

from rlhf_course.grading.sandbox.sandbox import CGROUPS, FIRST_UID, bwrap_command, limited_command

from tests.support.course import needs_sandbox

pytestmark = needs_sandbox

PROBE = r"""
import json, os, resource, socket
report = {"uid": os.getuid(), "env": sorted(os.environ), "cwd": os.getcwd()}
report["sees"] = {p: os.path.exists(p) for p in (COURSE + "/source", COURSE + "/gradebook.db",
                                                    COURSE + "/instructor", COURSE + "/submitted", "/root/.ssh")}
try:
    socket.create_connection(("127.0.0.1", 22), timeout=1); report["network"] = "open"
except OSError as exc:
    report["network"] = type(exc).__name__
for target in ("/usr/evil", "/tmp/../etc/evil", "/submission/ok.txt"):
    try:
        open(target, "w").write("x"); report[target] = "written"
    except OSError as exc:
        report[target] = type(exc).__name__
report["limits"] = {name: resource.getrlimit(getattr(resource, name))[0]
                    for name in ("RLIMIT_AS", "RLIMIT_CPU", "RLIMIT_FSIZE", "RLIMIT_NPROC")}
print(json.dumps(report))
"""


def run_probe(tmp_path, repo) -> dict:
    program = [os.path.join(sys.prefix, "bin", "python"), "-c", PROBE.replace("COURSE", repr(str(repo)))]
    command = limited_command(bwrap_command(FIRST_UID, {"PATH": "/usr/bin:/bin"}, Limits(), program), Limits(),
                              CGROUPS.prepare(0, Limits()))
    env = dict(os.environ, RLHF_GRADER_SECRET="do-not-leak")
    proc = subprocess.run(command, capture_output=True, text=True, env=env, timeout=60)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_sandbox_view_and_limits(tmp_path, repo):
    report = run_probe(tmp_path, repo)
    assert report["uid"] == FIRST_UID
    assert set(report["env"]) <= {"PATH", "PWD", "LC_CTYPE"}, report["env"]  # no RLHF_GRADER_SECRET
    assert not any(report["sees"].values()), report["sees"]
    assert report["network"] in ("ConnectionRefusedError", "OSError")
    assert report["/usr/evil"] != "written" and report["/tmp/../etc/evil"] != "written"
    assert report["/submission/ok.txt"] == "written"
    limits = Limits()
    assert report["limits"] == {"RLIMIT_AS": limits.memory_bytes, "RLIMIT_CPU": limits.cpu_seconds,
                                "RLIMIT_FSIZE": limits.file_bytes, "RLIMIT_NPROC": limits.processes}


ZYGOTE_PROBE = PROBE.replace("print(json.dumps(report))", r"""
status = dict(line.split(":", 1) for line in open("/proc/self/status") if ":" in line)
report["privileges"] = {k: status[k].strip() for k in ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb", "NoNewPrivs")}
report["groups"] = os.getgroups()
report["processes"] = sorted(int(p) for p in os.listdir("/proc") if p.isdigit())
writable = []
for line in open("/proc/self/mountinfo"):
    point = line.split()[4]
    if point.startswith(("/proc", "/dev/")):  # proc files, device nodes, ptys
        continue
    if os.access(point, os.W_OK):
        writable.append(point)
report["writable"] = sorted(set(writable))
raise SystemExit(json.dumps(report))
""")


def test_zygote_sandbox_view_and_limits(repo, monkeypatch):
    """The same view through the real path: a sandbox forked by the zygote, its probe run as an answer cell."""
    from rlhf_course.grading.sandbox.sandbox import ZYGOTE, Sandbox
    ZYGOTE.stop()
    monkeypatch.setenv("RLHF_GRADER_SECRET", "do-not-leak")  # the zygote starts from this environment
    job = {"setup": "", "answer_cells": {"probe": ZYGOTE_PROBE.replace("COURSE", repr(str(repo)))},
           "notebook_name": "n.ipynb", "notebook_json": '{"cells": [], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}',
           "notebook_cap": 1 << 20, "reply_cap": 1 << 20}
    try:
        with Sandbox(job, slot=0).start() as box:
            reply = box.define()["probe"]
            slot = box.slot
    finally:
        ZYGOTE.stop()
    assert reply.startswith("SystemExit: {"), reply
    report = json.loads(reply.removeprefix("SystemExit: "))
    assert report["uid"] == FIRST_UID + slot and report["groups"] == []
    assert report["cwd"] == "/submission"
    assert "RLHF_GRADER_SECRET" not in report["env"], report["env"]
    assert not any(report["sees"].values()), report["sees"]
    assert report["network"] in ("ConnectionRefusedError", "OSError")
    assert report["/usr/evil"] != "written" and report["/tmp/../etc/evil"] != "written"
    assert report["/submission/ok.txt"] == "written"
    assert report["privileges"] == {"CapInh": "0" * 16, "CapPrm": "0" * 16, "CapEff": "0" * 16, "CapBnd": "0" * 16,
                                    "CapAmb": "0" * 16, "NoNewPrivs": "1"}
    assert len(report["processes"]) == 2 and report["processes"][0] == 1, report["processes"]  # supervisor, child
    assert report["writable"] == ["/submission", "/tmp"], report["writable"]
    limits = Limits()
    assert report["limits"] == {"RLIMIT_AS": limits.memory_bytes, "RLIMIT_CPU": limits.cpu_seconds,
                                "RLIMIT_FSIZE": limits.file_bytes, "RLIMIT_NPROC": limits.processes}


def test_the_zygote_keeps_four_capabilities_and_no_course():
    """The zygote (root in its own bubblewrap sandbox) holds exactly the capabilities it needs to make sandboxes,
    the sandbox's read-only view and no descriptor but its log, its control socket and its PID namespace."""
    from rlhf_course.course.limits import Limits
    from rlhf_course.grading.sandbox.sandbox import ZYGOTE
    ZYGOTE.stop()
    ZYGOTE.prestart()
    try:
        with ZYGOTE._lock:
            ZYGOTE._await_ready(Limits())
        bwrap = ZYGOTE.process.pid
        [zygote] = [int(p) for p in os.listdir("/proc") if p.isdigit() and _parent(int(p)) == bwrap]
        with open(f"/proc/{zygote}/status") as handle:
            status = dict(line.split(":", 1) for line in handle if ":" in line)
        wanted = sum(1 << n for n in (6, 7, 8, 21))  # CAP_SETGID, CAP_SETUID, CAP_SETPCAP, CAP_SYS_ADMIN
        assert {k: int(status[k], 16) for k in ("CapEff", "CapPrm", "CapBnd")} == dict.fromkeys(
            ("CapEff", "CapPrm", "CapBnd"), wanted), status
        assert int(status["CapAmb"], 16) == 0 and status["NoNewPrivs"].strip() == "1"
        targets = sorted(os.readlink(f"/proc/{zygote}/fd/{fd}") for fd in os.listdir(f"/proc/{zygote}/fd"))
        assert targets[0] == "/dev/null" and all(t.startswith(("socket:", "pid:", "/tmp/#")) for t in targets[1:]), targets
        root = f"/proc/{zygote}/root"
        assert not os.path.exists(root + str(Path(__file__).resolve().parents[2] / "source"))
    finally:
        ZYGOTE.stop()


def _parent(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return int(handle.read().rsplit(")", 1)[1].split()[1])
    except (OSError, ValueError):
        return -1


SYSCALL_PROBE = r"""
import ctypes, errno, json, os, subprocess, threading
from rlhf_course.grading.sandbox import seccomp
libc = ctypes.CDLL(None, use_errno=True)
numbers = seccomp.architecture().numbers

def call(name, *args):
    ctypes.set_errno(0)
    result = libc.syscall(ctypes.c_long(numbers[name]), *(ctypes.c_long(a) for a in args))
    if result == 0 and name == "clone":
        os._exit(0)  # a child the kernel made: it must not run the probe on
    return errno.errorcode.get(ctypes.get_errno(), "ok") if result == -1 else "ok"

# Arguments that do no harm where the call is allowed (most fail on a null pointer or a bad descriptor).
ARGS = {"unshare": [seccomp.CLONE_NEWUSER], "setns": [-1, 0], "mount": [0, 0, 0, 0, 0], "umount2": [0, 0],
        "pivot_root": [0, 0], "open_tree": [-1, 0, 0], "move_mount": [-1, 0, -1, 0, 0], "fsopen": [0, 0],
        "fsconfig": [-1, 0, 0, 0, 0], "fsmount": [-1, 0, 0], "fspick": [-1, 0, 0], "mount_setattr": [-1, 0, 0, 0, 0],
        "keyctl": [0, -3, 0], "add_key": [0, 0, 0, 0, 0], "request_key": [0, 0, 0, 0], "bpf": [0, 0, 0],
        "perf_event_open": [0, 0, -1, -1, 0], "userfaultfd": [1], "io_uring_setup": [1, 0],
        "io_uring_enter": [-1, 0, 0, 0, 0, 0], "io_uring_register": [-1, 0, 0, 0], "ptrace": [16, 999999, 0, 0],
        "process_vm_readv": [999999, 0, 0, 0, 0, 0], "process_vm_writev": [999999, 0, 0, 0, 0, 0]}
report = {name: call(name, *ARGS[name]) for name in seccomp.DENIED}
report["clone a namespace"] = call("clone", seccomp.CLONE_NEWUSER | 17, 0, 0, 0, 0)
report["clone3"] = call("clone3", 0, 0)
pid = os.fork()
if pid == 0:
    os._exit(7)
report["fork"] = os.WEXITSTATUS(os.waitpid(pid, 0)[1])
box = []
thread = threading.Thread(target=lambda: box.append("ran"))
thread.start(); thread.join()
report["thread"] = box
report["subprocess"] = subprocess.run(["/bin/sh", "-c", "exit 5"]).returncode
report["key-users"] = open("/proc/key-users").read()
report["Seccomp"] = dict(line.split(":", 1) for line in open("/proc/self/status") if ":" in line)["Seccomp"].strip()
raise SystemExit(json.dumps(report))
"""


def test_student_code_cannot_make_namespaces_mount_use_keyrings_or_trace():
    """Through the real path (a sandbox forked by the zygote): each denied system call answers EPERM, clone3
    ENOSYS (so that the C library falls back to clone, whose flags the filter reads), and what honest code
    does (fork, threads, subprocesses) works."""
    from rlhf_course.grading.sandbox.sandbox import ZYGOTE, Sandbox
    from rlhf_course.grading.sandbox import seccomp
    job = {"setup": "", "answer_cells": {"probe": SYSCALL_PROBE},
           "notebook_name": "n.ipynb", "notebook_json": '{"cells": [], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}',
           "notebook_cap": 1 << 20, "reply_cap": 1 << 20}
    try:
        with Sandbox(job, slot=0).start() as box:
            reply = box.define()["probe"]
    finally:
        ZYGOTE.stop()
    assert reply.startswith("SystemExit: {"), reply
    report = json.loads(reply.removeprefix("SystemExit: "))
    denied = {name: report[name] for name in (*seccomp.DENIED, "clone a namespace")}
    assert denied == dict.fromkeys(denied, "EPERM"), denied
    assert report["clone3"] == "ENOSYS"
    assert (report["fork"], report["thread"], report["subprocess"]) == (7, ["ran"], 5)
    assert report["key-users"] == "" and report["Seccomp"] == "2"


def test_the_filter_knows_its_architectures():
    from rlhf_course.grading.sandbox import seccomp
    for machine, arch in seccomp.ARCHITECTURES.items():
        assert set(arch.numbers) >= {*seccomp.DENIED, "clone", "clone3"}, machine
        assert len(seccomp.program(arch)) % 8 == 0
    with pytest.raises(seccomp.UnknownArchitecture):
        seccomp.architecture("riscv64")
