"""A user's server and what it starts bind no TCP port but the server's own (rlhf_course/classroom/tcp_binds.py).

Each case runs in a process of its own (a Landlock domain cannot be left) made as the spawner makes a server's: the
classroom's `preexec_fn` as root (no cgroup, no limits, no change of user: the binds are the subject)."""
from __future__ import annotations

import json
import os
import socket
import subprocess
import sys

import pytest

from rlhf_course.classroom.spawner import UserCgroup, limited_preexec
from rlhf_course.classroom.tcp_binds import bind_rules_supported

pytestmark = pytest.mark.skipif(not bind_rules_supported(), reason="this kernel's Landlock has no network rules")

PROBE = """import json, os, socket, subprocess, sys
def bind(port, family=socket.AF_INET, kind=socket.SOCK_STREAM, host="127.0.0.1"):
    s = socket.socket(family, kind)
    try:
        s.bind((host, port))
        return "bound"
    except PermissionError:
        return "refused"
    finally:
        s.close()
port = int(sys.argv[1])
said = {"own": bind(port), "any": bind(0), "another": bind(port + 1), "ipv6 any": bind(0, socket.AF_INET6, host="::1"),
        "udp": bind(0, kind=socket.SOCK_DGRAM)}
child = subprocess.run([sys.executable, "-c", "import socket\\ntry:\\n    socket.socket().bind(('127.0.0.1', 0))\\n"
                        "    print('bound')\\nexcept PermissionError:\\n    print('refused')"],
                       capture_output=True, text=True)
said["a process it starts"] = child.stdout.strip()
with socket.create_connection(("127.0.0.1", int(sys.argv[2])), timeout=10):
    said["connect"] = "connected"
print(json.dumps(said))
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_as_a_server(port: int | None, listening: int) -> dict:
    name = f"tcp-binds-test-{os.getpid()}"
    preexec = limited_preexec(name, lambda: None, None, None, None, None, bind_port=port)
    try:
        done = subprocess.run([sys.executable, "-c", PROBE, str(port or free_port()), str(listening)],
                              preexec_fn=preexec, capture_output=True, text=True, timeout=60)
    finally:
        UserCgroup(name).remove()
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.splitlines()[-1])


@pytest.fixture
def listener():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        yield s.getsockname()[1]


@pytest.mark.skipif(os.geteuid() != 0, reason="the spawner's preexec runs as root")
def test_a_server_binds_its_own_port_only_and_so_does_all_it_starts(listener):
    port = free_port()
    said = run_as_a_server(port, listener)
    assert said == {"own": "bound", "any": "refused", "another": "refused", "ipv6 any": "refused", "udp": "bound",
                    "a process it starts": "refused", "connect": "connected"}


@pytest.mark.skipif(os.geteuid() != 0, reason="the spawner's preexec runs as root")
def test_without_a_port_nothing_is_restricted(listener):
    said = run_as_a_server(None, listener)
    assert said["any"] == said["another"] == said["a process it starts"] == "bound"
