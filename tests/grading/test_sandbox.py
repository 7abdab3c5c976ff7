"""What student code can see and do inside the sandbox, checked from the inside."""
import json
import os
import subprocess
import sys

from rlhf_course.grading.limits import Limits

from rlhf_course.grading.sandbox import CGROUPS, FIRST_UID, bwrap_command, limited_command

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
