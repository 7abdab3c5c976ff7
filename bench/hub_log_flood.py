"""What one student's loop of requests writes into the hub's and the proxy's own logs, and how fast.

    sudo .venv/bin/python bench/hub_log_flood.py [--seconds 10] [--proxy .cache/hub-proxy/node_modules/.bin/configurable-http-proxy]

Starts the classroom's JupyterHub and proxy as `make hub` does (rlhf_course/classroom/hub.py: its configuration,
its logs written through the classroom's pipes), with one account and no server, then for ``--seconds`` each runs
one client, as a student's script would, that sends as fast as it is answered, on one kept-alive connection:

* ``404``: ``GET /hub/<15,000 characters>`` through the proxy (the hub logs the path);
* ``failed login``: the login form posted with a wrong password, its ``next`` 15,000 characters long;
* ``bad token``: ``GET /hub/api/user?<15,000 characters>`` with ``Authorization: token bad``;
* ``proxy API``: ``GET /api/routes/<15,000 characters>`` on the proxy's API port with a wrong token.

For each it prints the requests per second, the bytes the hub's and the proxy's logs gained per request as written
(lines past 2 KiB cut) and as the processes wrote them (what a log written straight to a file gained: the cut
bytes added back), and the disk a day of that loop fills, with the host's speed (bench/host_speed.py) before and
after, and a classmate's ``GET /hub/health`` through the proxy (one every 0.1 s) while nothing else runs and
during each flood.  Needs root (the hub's internal ports are root's).  About 5 x ``seconds`` plus 15 s.
"""
from __future__ import annotations

import argparse
import concurrent.futures
import http.client
import os
import re
import statistics
import sys
import tempfile
import time
import urllib.parse
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(1, str(REPO))
from bench.host_speed import measure  # noqa: E402
from rlhf_course.classroom.hub import Classroom, free_port  # noqa: E402
from rlhf_course.classroom.prestart import TOKEN_FILE  # noqa: E402

LONG = "a" * 15_000  # node's default limit is 16 KiB for the request line and headers together
CUT = re.compile(rb"\[\.\.\. (\d+) bytes cut\]")


def written(folder: Path, name: str) -> tuple[int, int]:
    """Bytes in the log ``name`` and its set-aside file, and the bytes its cut lines say were cut."""
    size = cut = 0
    for path in (folder / name, folder / f"{name}.1"):
        if path.exists():
            data = path.read_bytes()
            size += len(data)
            cut += sum(int(n) for n in CUT.findall(data))
    return size, cut


def xsrf(connection: http.client.HTTPConnection) -> tuple[str, str]:
    """The login form's _xsrf field and the cookie it goes with."""
    connection.request("GET", "/hub/login")
    response = connection.getresponse()
    page = response.read().decode()
    cookie = "; ".join(header.split(";", 1)[0] for header in response.headers.get_all("Set-Cookie") or [])
    return re.search(r'name="_xsrf" value="([^"]+)"', page).group(1), cookie


def flood(kind: str, room: Classroom, seconds: float) -> int:
    """Requests of ``kind`` sent one after the other for ``seconds``; how many were answered."""
    port = room.proxy_api_port if kind == "proxy API" else room.port
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    form, cookie = xsrf(connection) if kind == "failed login" else ("", "")
    answered, end = 0, time.monotonic() + seconds
    while time.monotonic() < end:
        if kind == "404":
            connection.request("GET", f"/hub/{LONG}")
        elif kind == "failed login":
            body = urllib.parse.urlencode({"username": "flooder", "password": "wrong", "_xsrf": form})
            connection.request("POST", f"/hub/login?next=/{LONG}", body=body,
                               headers={"Content-Type": "application/x-www-form-urlencoded", "Cookie": cookie})
        elif kind == "bad token":
            connection.request("GET", f"/hub/api/user?{LONG}", headers={"Authorization": "token bad"})
        else:
            connection.request("GET", f"/api/routes/{LONG}", headers={"Authorization": "token bad"})
        response = connection.getresponse()
        response.read()
        if response.getheader("Connection", "").lower() == "close":
            connection.close()
            connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        answered += 1
    connection.close()
    return answered


def classmate_waits(room: Classroom, seconds: float) -> list[float]:
    """Seconds a classmate's ``GET /hub/health`` through the proxy takes, one every 0.1 s for ``seconds``."""
    waits, end = [], time.monotonic() + seconds
    while time.monotonic() < end:
        started = time.monotonic()
        connection = http.client.HTTPConnection("127.0.0.1", room.port, timeout=30)
        connection.request("GET", "/hub/health")
        connection.getresponse().read()
        connection.close()
        waits.append(time.monotonic() - started)
        time.sleep(0.1)
    return waits


def flooded(kind: str, room: Classroom, seconds: float) -> tuple[int, list[float]]:
    """The flood of ``kind`` in a thread, a classmate's waits meanwhile."""
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        flooding = pool.submit(flood, kind, room, seconds)
        waits = classmate_waits(room, seconds - 0.5)
        return flooding.result(), waits


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=10.0, help="each kind of request's length")
    parser.add_argument("--proxy", type=Path, default=REPO / ".cache/hub-proxy/node_modules/.bin/configurable-http-proxy")
    arguments = parser.parse_args()
    if os.geteuid() != 0:
        raise SystemExit("run it as root: the hub's internal ports are root's, as make hub's are")
    print(f"host speed before: {measure(1)[1]:.2f}x", flush=True)
    with tempfile.TemporaryDirectory(prefix="hubflood-") as folder:
        base = Path(folder)
        room = Classroom(REPO, base, "flood_", ["ann"], free_port(), arguments.proxy, idle_timeout=0)
        python = base / "python"  # the hub imports this checkout's package, as make hub's imports its installed copy
        python.write_text(f"#!/bin/sh\nPYTHONPATH={REPO} exec {sys.executable} \"$@\"\n")
        python.chmod(0o755)
        room.server = type("Env", (), {"python": str(python), "path": os.environ["PATH"]})()
        room.course_id, room.hub_dir = "rlhf-course", base / "hub"
        room.passwords = {name: "a long password" for name in room.names}
        room.hub_dir.mkdir(mode=0o700)
        (room.hub_dir / TOKEN_FILE).write_text("prestart token of the bench\n")
        room.write_hub_config()
        try:
            room.start_proxy()
            room.start(timeout=120)
            quiet = classmate_waits(room, arguments.seconds)
            print(f"quiet         a classmate's /hub/health p50 {statistics.median(quiet) * 1000:.1f} ms, "
                  f"max {max(quiet) * 1000:.1f} ms", flush=True)
            for kind in ("404", "failed login", "bad token", "proxy API"):
                before = {name: written(room.hub_dir, name) for name in ("jupyterhub.log", "proxy.log")}
                answered, waits = flooded(kind, room, arguments.seconds)
                time.sleep(0.5)  # the last lines through the pipes
                gained = {name: [a - b for a, b in zip(written(room.hub_dir, name), before[name])]
                           for name in before}
                size = sum(size for size, _ in gained.values())
                raw = size + sum(cut for _, cut in gained.values())
                rate = answered / arguments.seconds
                print(f"{kind:13} {rate:7.0f} requests/s; per request: the logs gained {size / answered:7.0f} bytes "
                      f"(hub {gained['jupyterhub.log'][0] / answered:.0f}, proxy {gained['proxy.log'][0] / answered:.0f}),"
                      f" {raw / answered:7.0f} uncut; a day of it: {size * rate / answered * 86400 / 1e9:6.1f} GB, "
                      f"{raw * rate / answered * 86400 / 1e9:6.1f} GB uncut; a classmate's /hub/health meanwhile "
                      f"p50 {statistics.median(waits) * 1000:.1f} ms, max {max(waits) * 1000:.1f} ms", flush=True)
        finally:
            room.stop()
    print(f"host speed after: {measure(1)[1]:.2f}x", flush=True)


if __name__ == "__main__":
    main()
