"""Start the class's servers before the class (issue #37: a burst of 30 logins spent 49 s at p95 starting
servers that could have been started beforehand).

    sudo .venv/bin/python -m rlhf_course.classroom prestart [--base /srv/rlhf-classroom] [NAME ...] [--roster FILE]
                                                             [--parallel 2] [--hold-until 14:00]

Asks the running hub (`make hub`) to start each student's server through its REST API
(``POST /hub/api/users/<name>/server``), as JupyterHub's admin page does, with the token of the hub's
``prestart`` service (``<base>/hub/prestart-token``, root's, 0600: the hub grants it only ``list:users``,
``read:users``, ``read:servers``, ``servers`` (start and stop) and ``users:activity``; it opens no server, so it
reads no student's files).  ``--parallel`` servers start at a time (default: this machine's CPUs: a server's
start is about 1.8 CPU-s and a busy machine starts them no faster in parallel), with a progress bar; a
student whose server runs already (or is starting) is left as is, so running it twice is harmless; every
student's result (started, running already, failed and why) is printed, and the exit status is 1 if any failed.

Students then log in to a running server.  The idle culler (``--idle-timeout``, 3600 s by default) counts a
server nobody used from its start: run this at most that long before the class, or keep the command running
with ``--hold-until HH:MM`` (today, this machine's local time): until then it tells the hub every
``idle_timeout / 4`` seconds (at most every minute) that the pre-started servers are active, so the culler leaves
them alone; afterwards the culler's idle time counts as usual.
"""
from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

TOKEN_FILE = "prestart-token"  # in the hub's folder (root's, 0700)
SERVER_LOGS = "servers"  # in the hub's folder: each user's server's own log, <user>.log (spawner.server_log)
SCOPES = ["list:users", "read:users", "read:servers", "servers", "users:activity"]


def hub_config(token_file: Path) -> str:
    """The lines of jupyterhub_config.py that register the prestart service and its role (appended, so the
    culler's service stays)."""
    return f"""
# `python -m rlhf_course.classroom prestart`: starts the students' servers before the class (its token: root's)
c.JupyterHub.services.append({{"name": "prestart", "api_token": open({str(token_file)!r}).read().strip()}})
c.JupyterHub.load_roles.append({{"name": "prestart", "services": ["prestart"], "scopes": {SCOPES!r}}})
"""


@dataclass
class Outcome:
    name: str
    status: str  # "started", "running already", "failed"
    seconds: float = 0.0
    reason: str = ""


class HubAPI:
    """The hub's REST API with the prestart service's token."""

    def __init__(self, url: str, token: str, timeout: float = 60):
        import requests
        self.base = f"{url.rstrip('/')}/hub/api"
        self.http = requests.Session()
        self.http.headers["Authorization"] = f"token {token}"
        self.timeout = timeout

    def user(self, name: str) -> dict:
        reply = self.http.get(f"{self.base}/users/{name}", timeout=self.timeout)
        if reply.status_code == 404:
            raise LookupError(f"the hub has no user {name}")
        reply.raise_for_status()
        return reply.json()

    def start(self, name: str):
        return self.http.post(f"{self.base}/users/{name}/server", timeout=self.timeout)

    def mark_active(self, names: list[str]) -> list[str]:
        """Tell the hub these users' servers are active now; the names it refused, each with why (a hub down
        for a moment, restarting mid-class, is said and tried again at the next round)."""
        import requests
        now = dt.datetime.now(dt.timezone.utc).isoformat().replace("+00:00", "Z")
        refused = []
        for name in names:
            try:
                reply = self.http.post(f"{self.base}/users/{name}/activity", timeout=self.timeout,
                                       json={"last_activity": now, "servers": {"": {"last_activity": now}}})
            except requests.RequestException as error:
                refused.append(f"{name} (the hub did not answer: {type(error).__name__})")
                continue
            if reply.status_code >= 400:
                refused.append(f"{name} ({reply.status_code}: {_reason(reply)})")
        return refused


def server_state(user: dict) -> str:
    """``ready``, ``pending`` (starting or stopping) or ``stopped``: the user's default server in the hub's model."""
    server = (user.get("servers") or {}).get("")
    if server and server.get("ready"):
        return "ready"
    if (server and server.get("pending")) or user.get("pending"):
        return "pending"
    return "stopped"


def _reason(reply) -> str:
    try:
        return str(reply.json().get("message", reply.text))[:300]
    except ValueError:
        return reply.text[:300]


def prestart_one(api: HubAPI, name: str, timeout: float, poll: float = 0.5) -> Outcome:
    """Start one student's server and wait until the hub says it is ready (never raises)."""
    began = time.perf_counter()
    try:
        state = server_state(api.user(name))
        if state == "ready":
            return Outcome(name, "running already")
        if state == "stopped":
            reply = api.start(name)
            if reply.status_code == 400 and "already running" in reply.text:
                return Outcome(name, "running already")
            if reply.status_code not in (201, 202):
                return Outcome(name, "failed", time.perf_counter() - began,
                               f"the hub answered {reply.status_code}: {_reason(reply)}")
        while time.perf_counter() - began < timeout:
            state = server_state(api.user(name))
            if state == "ready":
                return Outcome(name, "started", time.perf_counter() - began)
            if state == "stopped":  # the spawn failed: the server's own log says why, the hub's the spawner's error
                return Outcome(name, "failed", time.perf_counter() - began,
                               f"the server stopped while starting (its output: {SERVER_LOGS}/{name}.log; "
                               "the spawner's error: jupyterhub.log; both in the hub's folder)")
            time.sleep(poll)
        return Outcome(name, "failed", time.perf_counter() - began, f"not ready after {timeout:.0f} s")
    except Exception as error:  # one student's failure is reported; the others go on
        return Outcome(name, "failed", time.perf_counter() - began, f"{type(error).__name__}: {error}"[:300])


def resolve_names(asked: list[str], students: list[str], prefix: str) -> tuple[list[str], list[Outcome]]:
    """The classroom's account names for ``asked`` (full account names, or without the classroom's prefix),
    in order, each once; every other name as a failed outcome.  Nothing asked: every student."""
    if not asked:
        return list(students), []
    known, found, unknown = set(students), [], []
    for name in asked:
        account = name if name in known else f"{prefix}{name}" if f"{prefix}{name}" in known else None
        if account is None:
            unknown.append(Outcome(name, "failed", reason="not a student of this classroom"))
        elif account not in found:
            found.append(account)
    return found, unknown


def read_roster(path: Path) -> list[str]:
    """One name a line; blank lines and ``#`` comments skipped."""
    return [line.split("#", 1)[0].strip() for line in path.read_text().splitlines() if line.split("#", 1)[0].strip()]


def prestart(api: HubAPI, names: list[str], parallel: int, timeout: float, progress=None,
             poll: float = 0.5) -> list[Outcome]:
    """Start ``names``' servers, ``parallel`` at a time; the outcomes in ``names``' order."""
    lock = threading.Lock()

    def one(name):
        outcome = prestart_one(api, name, timeout, poll)
        if progress is not None:
            with lock:
                progress.set_postfix_str(f"{name}: {outcome.status}", refresh=False)
                progress.update()
        return outcome

    with ThreadPoolExecutor(max_workers=max(1, parallel)) as pool:
        return list(pool.map(one, names))


def until(clock: str, now: dt.datetime | None = None) -> dt.datetime:
    """Today's ``HH:MM`` (local time) as an aware datetime; refused when it has passed."""
    now = now or dt.datetime.now().astimezone()
    try:
        hours, minutes = (int(x) for x in clock.split(":"))
        moment = now.replace(hour=hours, minute=minutes, second=0, microsecond=0)
    except ValueError:
        raise SystemExit(f"--hold-until {clock!r}: give a time of today as HH:MM (e.g. 14:00)") from None
    if moment <= now:
        raise SystemExit(f"--hold-until {clock}: that time has passed today (now {now:%H:%M})")
    return moment


def hold(api: HubAPI, names: list[str], moment: dt.datetime, every: float, stop: threading.Event | None = None) -> None:
    """Mark ``names``' servers active every ``every`` seconds until ``moment``."""
    stop = stop or threading.Event()
    while dt.datetime.now().astimezone() < moment and not stop.is_set():
        refused = api.mark_active(names)
        if refused:
            print(f"the hub refused to mark active: {', '.join(refused)}", flush=True)
        left = (moment - dt.datetime.now().astimezone()).total_seconds()
        stop.wait(max(0.0, min(every, left)))


def report(outcomes: list[Outcome]) -> str:
    width = max((len(o.name) for o in outcomes), default=4)
    lines = [f"  {o.name:<{width}}  {o.status}" + (f" in {o.seconds:.1f} s" if o.status == "started" else "")
             + (f": {o.reason}" if o.reason else "") for o in outcomes]
    counts = {s: sum(o.status == s for o in outcomes) for s in ("started", "running already", "failed")}
    return "\n".join(lines + [f"{counts['started']} started, {counts['running already']} running already, "
                              f"{counts['failed']} failed"])


EXAMPLES = """\
examples (rlhf-classroom is python -m rlhf_course.classroom; as root, while make hub runs):
  sudo .venv/bin/rlhf-classroom prestart                         # every student's server of /srv/rlhf-classroom
  sudo .venv/bin/rlhf-classroom prestart alice bob --parallel 1  # two students' (with or without the prefix)
  sudo .venv/bin/rlhf-classroom prestart --roster today.txt --hold-until 14:00   # kept from the idle culler till 14:00
"""


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m rlhf_course.classroom prestart",
                                     description=__doc__.split("\n\n")[0], epilog=EXAMPLES,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("names", nargs="*", help="students (account names, or without the classroom's prefix); "
                        "default: every student of the classroom")
    parser.add_argument("--roster", type=Path, help="a file of students, one a line (with the names above)")
    parser.add_argument("--base", type=Path, default=Path("/srv/rlhf-classroom"), help="the classroom's folder "
                        "(make hub's HUB_BASE)")
    parser.add_argument("--parallel", type=int, default=len(os.sched_getaffinity(0)),
                        help="servers starting at a time (default: this machine's CPUs)")
    parser.add_argument("--timeout", type=float, default=300, help="seconds one server may take to start")
    parser.add_argument("--hold-until", metavar="HH:MM", help="keep the servers from the idle culler until then")
    args = parser.parse_args(argv)
    hub = args.base / "hub"
    try:
        accounts = json.loads((hub / "accounts.json").read_text())
        token = (hub / TOKEN_FILE).read_text().strip()
    except FileNotFoundError as missing:
        raise SystemExit(f"no classroom at {args.base} ({missing.filename} missing): is make hub running, with "
                         f"HUB_BASE={args.base}?") from None
    except PermissionError as denied:
        raise SystemExit(f"{denied.filename}: only root reads the hub's folder (sudo)") from None
    if args.parallel < 1:
        parser.error("--parallel must be at least 1")
    moment = until(args.hold_until) if args.hold_until else None
    try:
        asked = args.names + (read_roster(args.roster) if args.roster else [])
    except (OSError, UnicodeDecodeError) as unreadable:
        raise SystemExit(f"--roster {args.roster}: {unreadable}") from None
    names, outcomes = resolve_names(asked, accounts["students"], accounts.get("prefix", ""))
    api = HubAPI(accounts["url"], token)
    from tqdm import tqdm
    began = time.perf_counter()
    with tqdm(total=len(names), desc="starting servers", unit="server", file=sys.stderr) as progress:
        outcomes = prestart(api, names, args.parallel, args.timeout, progress) + outcomes
    print(report(outcomes), flush=True)
    print(f"in {time.perf_counter() - began:.1f} s, {args.parallel} at a time", flush=True)
    idle = accounts.get("idle_timeout", 0)
    running = [o.name for o in outcomes if o.status != "failed"]
    if moment and running:
        every = max(1.0, min(60.0, idle / 4)) if idle else 60.0
        print(f"keeping {len(running)} servers from the idle culler until {moment:%H:%M} (Ctrl-C stops that, "
              f"not the servers)", flush=True)
        try:
            hold(api, running, moment, every)
        except KeyboardInterrupt:
            pass
    elif idle and running:
        print(f"the idle culler stops a server nobody uses for {idle} s: these are stopped from "
              f"{dt.datetime.now() + dt.timedelta(seconds=idle):%H:%M} if no student has opened them by then "
              f"(--hold-until HH:MM keeps them)", flush=True)
    return 1 if any(o.status == "failed" for o in outcomes) else 0
