"""What one request of any local account may make the classroom's JupyterHub hold (rlhf_course/classroom/
hub_requests.py): the classroom's own hub and proxy, as make hub configures and starts them, with a password table
and no server (no Unix account, no spawn), about 15 s; needs root (the hub's internal ports are root's) and the
proxy make hub installs."""
import http.client
import json
import os
import re
import resource
import socket
import subprocess
import sys
import time
import urllib.parse
from pathlib import Path

import pytest

from rlhf_course.classroom.hub import Classroom, free_port
from rlhf_course.classroom.hub_requests import MAX_BODY_BYTES
from rlhf_course.classroom.prestart import TOKEN_FILE

REPO = Path(__file__).resolve().parents[2]
CHP = ".cache/hub-proxy/node_modules/.bin/configurable-http-proxy"
PASSWORD = "her password for this run"
SYSTEM_PYTHON = "/usr/bin/python3"  # reachable by every account, unlike a private checkout's .venv


@pytest.fixture(scope="module")
def hub(tmp_path_factory):
    if os.geteuid() != 0:
        pytest.skip("the classroom's hub listens on ports only root may bind")
    subprocess.run(["make", "-s", "-o", ".venv/.installed-stamp", CHP], cwd=REPO, check=True)
    base = tmp_path_factory.mktemp("hub-requests")
    room = Classroom(REPO, base, "req_", ["ann"], free_port(), REPO / CHP, idle_timeout=0)
    python = base / "python"  # the hub imports this checkout's package, as make hub's imports its installed copy
    python.write_text(f"#!/bin/sh\nPYTHONPATH={REPO} exec {sys.executable} \"$@\"\n")
    python.chmod(0o755)
    room.server = type("Env", (), {"python": str(python), "path": os.environ["PATH"]})()
    room.course_id, room.hub_dir = "rlhf-course", base / "hub"
    room.passwords = {name: PASSWORD for name in room.names}
    room.hub_dir.mkdir(mode=0o700)
    (room.hub_dir / TOKEN_FILE).write_text("the prestart service's token in this test\n")
    room.write_hub_config()
    # as on a machine with the usual limits (1024 descriptors a process, soft), whatever this one's
    limit = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(1024, limit[1]), limit[1]))
    try:
        room.start_proxy()
        room.start(timeout=120)
        resource.setrlimit(resource.RLIMIT_NOFILE, limit)
        yield room
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, limit)
        room.stop()


def peak_memory(pid: int) -> int:
    """A process's resident memory at its highest so far, in bytes (VmHWM)."""
    [kib] = re.findall(r"VmHWM:\s+(\d+) kB", Path(f"/proc/{pid}/status").read_text())
    return int(kib) * 1024


def post_a_large_body(port: int, path: str, size: int) -> bytes:
    """Headers announcing ``size`` bytes of body, then the body as fast as the hub takes it: what came back."""
    with socket.create_connection(("127.0.0.1", port), timeout=30) as connection:
        connection.sendall(f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                           f"Content-Length: {size}\r\n\r\n".encode())
        chunk, sent = b"x" * (1024 * 1024), 0
        try:
            while sent < size:
                connection.sendall(chunk[:size - sent])
                sent += len(chunk)
        except OSError:  # the hub closed the connection: nothing more is read
            pass
        try:
            return connection.recv(200)
        except OSError:
            return b""


def test_a_body_past_the_bound_is_refused_before_the_hub_holds_it(hub):
    """80 MB posted to the login form, before any login, through the proxy and straight to the hub's own port:
    refused as the headers arrive, and the hub's memory at its highest grows by far less than one such body."""
    before = peak_memory(hub.process.pid)
    for port in (hub.port, hub.hub_port):
        answer = post_a_large_body(port, "/hub/login", 80_000_000)
        assert not answer.startswith(b"HTTP/1.1 2") and not answer.startswith(b"HTTP/1.1 3"), answer
    assert peak_memory(hub.process.pid) - before < 20_000_000, (before, peak_memory(hub.process.pid))
    assert hub.hub_answers()


def logged_in(hub) -> tuple[http.client.HTTPConnection, dict]:
    """A connection through the proxy and the headers of a request of a student logged in with the login form."""
    connection = http.client.HTTPConnection("127.0.0.1", hub.port, timeout=30)
    connection.request("GET", "/hub/login")
    response = connection.getresponse()
    page = response.read().decode()
    cookies = dict(header.split(";", 1)[0].split("=", 1) for header in response.headers.get_all("Set-Cookie"))
    xsrf = re.search(r'name="_xsrf" value="([^"]+)"', page).group(1)
    body = urllib.parse.urlencode({"username": "req_ann", "password": PASSWORD, "_xsrf": xsrf})
    cookie = "; ".join(f"{name}={value}" for name, value in cookies.items())
    connection.request("POST", "/hub/login", body=body,
                       headers={"Content-Type": "application/x-www-form-urlencoded", "Cookie": cookie})
    response = connection.getresponse()
    response.read()
    assert response.status == 302, response.status
    cookies.update(header.split(";", 1)[0].split("=", 1) for header in response.headers.get_all("Set-Cookie"))
    return connection, {"Cookie": "; ".join(f"{name}={value}" for name, value in cookies.items()),
                        "X-XSRFToken": cookies["_xsrf"]}


def call(connection, method: str, path: str, headers: dict, body: dict | None = None) -> tuple[int, dict]:
    connection.request(method, path, body=json.dumps(body) if body is not None else None, headers=headers)
    response = connection.getresponse()
    data = response.read()
    return response.status, json.loads(data) if data.startswith(b"{") else {}


def test_a_student_makes_no_token_so_no_note_of_hers_grows_the_hub_s_database(hub):
    """A token's note is stored whatever its size: a student asking for tokens with 60 kB notes, logged in or with
    her password in the request, is refused, and the hub's database does not grow; she still reads her own user and
    her tokens, and starting her own server and reaching it are still hers."""
    database = hub.hub_dir / "jupyterhub.sqlite"
    connection, headers = logged_in(hub)
    status, user = call(connection, "GET", "/hub/api/user", headers)
    assert status == 200 and user["name"] == "req_ann"
    assert {"servers!user=req_ann", "access:servers!user=req_ann", "read:tokens!user=req_ann"} <= set(user["scopes"])
    assert not any(scope.startswith("tokens") for scope in user["scopes"])
    assert call(connection, "GET", "/hub/api/users/req_ann/tokens", headers)[0] == 200
    size = database.stat().st_size
    note = "n" * 60_000
    for _ in range(20):
        assert call(connection, "POST", "/hub/api/users/req_ann/tokens", headers, {"note": note})[0] == 403
        with_password = {"note": note, "auth": {"username": "req_ann", "password": PASSWORD}}
        assert call(connection, "POST", "/hub/api/users/req_ann/tokens", {}, with_password)[0] == 403
    time.sleep(0.5)
    assert database.stat().st_size - size < 100_000, (size, database.stat().st_size)


def test_a_body_within_the_bound_still_reaches_the_hub(hub):
    """The bound is far above what the hub is sent: a login form padded to just under it is read and answered."""
    connection = http.client.HTTPConnection("127.0.0.1", hub.port, timeout=30)
    padding = "p" * (MAX_BODY_BYTES - 200)
    connection.request("POST", "/hub/login", body=urllib.parse.urlencode({"username": "req_ann", "pad": padding}),
                       headers={"Content-Type": "application/x-www-form-urlencoded"})
    response = connection.getresponse()
    response.read()
    assert response.status == 403  # read, and refused for its missing _xsrf: not cut off as too long (400)


HOLDS_CONNECTIONS = """
import resource, socket, sys, time
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
held = []
for port in map(int, sys.argv[2:]):
    for _ in range(int(sys.argv[1])):
        try:
            held.append(socket.create_connection(("127.0.0.1", port), timeout=2))
        except OSError:
            break  # no more taken on this port
print(len(held), flush=True)
time.sleep(60)
"""


def open_files_limit(pid: int) -> tuple[int, int]:
    [row] = [line for line in Path(f"/proc/{pid}/limits").read_text().splitlines() if line.startswith("Max open files")]
    soft, hard = row.split()[3:5]
    return int(soft), int(hard)


def test_a_student_holding_many_connections_leaves_the_hub_and_the_proxy_room_for_the_class(hub):
    """The hub and the proxy hold a descriptor for each connection any account opens to them: at the usual soft
    limit (1024), one student holding 1,500 idle connections to each left neither a descriptor for a classmate's
    request.  They run with their hard limit: the classmate is answered meanwhile."""
    holder = subprocess.Popen(["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups", SYSTEM_PYTHON,
                               "-c", HOLDS_CONNECTIONS, "1500", str(hub.port), str(hub.hub_port)],
                              stdout=subprocess.PIPE, text=True, cwd="/")
    try:
        held = holder.stdout.readline().strip()
        time.sleep(1)
        connection = http.client.HTTPConnection("127.0.0.1", hub.port, timeout=20)
        connection.request("GET", "/hub/health")
        assert connection.getresponse().status == 200
        assert held == "3000" and hub.hub_answers()
    finally:
        holder.kill()
        holder.wait()
    for pid in (hub.process.pid, hub.proxy_process.pid):
        soft, hard = open_files_limit(pid)
        assert soft == hard, (pid, soft, hard)
