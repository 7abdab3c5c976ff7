"""The burst levers of issue #37 without a hub: `python -m rlhf_course.classroom prestart` (names, the hub's answers,
idempotence, per-student failures, the culler kept off, the hub's config) against a stand-in for the hub's API, and
the warm kernel a server hands to the first notebook (a real kernel manager and kernels, no server).  The real hub
runs both in `bench/classroom.py --prestart --warm-kernels`.  About 4 s."""
import asyncio
import datetime as dt
import os
import sys
import threading
import time

import pytest
from traitlets.config import Config

from rlhf_course.classroom import prestart as ps


class FakeReply:
    def __init__(self, status_code, body=None):
        self.status_code, self._body = status_code, body or {}
        self.text = str(self._body)

    def json(self):
        return self._body


class FakeHub:
    """The hub's API for a few users: each user's default server moves through ``states`` as it is polled."""

    def __init__(self, states: dict[str, list[str]], start_answer: dict[str, FakeReply] | None = None):
        self.states, self.start_answer = {k: list(v) for k, v in states.items()}, start_answer or {}
        self.started, self.active = [], []

    def user(self, name):
        if name not in self.states:
            raise LookupError(f"the hub has no user {name}")
        state = self.states[name][0] if len(self.states[name]) == 1 else self.states[name].pop(0)
        server = {"ready": {"ready": True, "pending": None}, "pending": {"ready": False, "pending": "spawn"},
                  "stopped": None}[state]
        return {"name": name, "servers": {"": server} if server else {}}

    def start(self, name):
        self.started.append(name)
        return self.start_answer.get(name, FakeReply(202))

    def mark_active(self, names):
        self.active.append(list(names))
        return []


def test_prestart_starts_waits_and_reports_each_student():
    hub = FakeHub({"c_ann": ["stopped", "pending", "pending", "ready"], "c_ben": ["ready"],
                   "c_cat": ["pending", "ready"],
                   "c_dan": ["stopped"],  # the hub refuses
                   "c_eve": ["stopped", "pending", "stopped"]},  # the spawner failed
                  start_answer={"c_dan": FakeReply(403, {"message": "Action is not authorized"})})
    names, unknown = ps.resolve_names(["ann", "c_ben", "cat", "dan", "eve", "zed", "ann"],
                                      ["c_ann", "c_ben", "c_cat", "c_dan", "c_eve"], "c_")
    assert names == ["c_ann", "c_ben", "c_cat", "c_dan", "c_eve"]
    assert [(o.name, o.status, o.reason) for o in unknown] == [("zed", "failed", "not a student of this classroom")]
    outcomes = ps.prestart(hub, names, parallel=2, timeout=10, poll=0.02)
    got = {o.name: (o.status, o.reason) for o in outcomes}
    assert got["c_ann"] == ("started", "")
    assert got["c_ben"] == ("running already", "")  # idempotent: not started again
    assert got["c_cat"] == ("started", "")          # a spawn under way is waited for, not repeated
    assert got["c_dan"] == ("failed", "the hub answered 403: Action is not authorized")
    assert got["c_eve"][0] == "failed" and "stopped while starting" in got["c_eve"][1]
    assert "servers/c_eve.log" in got["c_eve"][1]  # where its own output is, not only the hub's log
    assert sorted(hub.started) == ["c_ann", "c_dan", "c_eve"]
    text = ps.report(outcomes + unknown)
    assert text.endswith("2 started, 1 running already, 3 failed")
    assert "  zed    failed: not a student of this classroom\n" in text


def test_prestart_gives_up_on_a_server_that_never_comes():
    outcome = ps.prestart_one(FakeHub({"c_ann": ["pending"]}), "c_ann", timeout=0.3, poll=0.05)
    assert outcome.status == "failed" and outcome.reason == "not ready after 0 s"
    assert ps.prestart_one(FakeHub({}), "c_nobody", timeout=1).reason == "LookupError: the hub has no user c_nobody"


def test_roster_and_hold_until(tmp_path):
    roster = tmp_path / "roster.txt"
    roster.write_text("ann\n\n# late joiners\nben  # second row\n")
    assert ps.read_roster(roster) == ["ann", "ben"]
    now = dt.datetime(2026, 12, 6, 9, 30).astimezone()
    assert ps.until("14:00", now).hour == 14
    with pytest.raises(SystemExit, match="has passed"):
        ps.until("09:00", now)
    with pytest.raises(SystemExit, match="HH:MM"):
        ps.until("2pm", now)
    hub = FakeHub({"c_ann": ["ready"]})
    began = time.perf_counter()
    ps.hold(hub, ["c_ann"], dt.datetime.now().astimezone() + dt.timedelta(seconds=0.35), every=0.1)
    assert 0.3 < time.perf_counter() - began < 2
    assert 3 <= len(hub.active) <= 5 and hub.active[0] == ["c_ann"]


@pytest.mark.parametrize("culler", [True, False])
def test_the_hub_grants_the_prestart_token_its_scopes_only(tmp_path, culler):
    token = tmp_path / "prestart-token"
    token.write_text("s3cret\n")
    c = Config()
    if culler:  # as Classroom.culler_config writes it before
        c.JupyterHub.services = [{"name": "idle-culler", "command": ["cull"]}]
        c.JupyterHub.load_roles = [{"name": "idle-culler", "services": ["idle-culler"], "scopes": ["list:users"]}]
    exec(ps.hub_config(token), {"c": c, "open": open})
    services = list(c.JupyterHub.services) if culler else c.JupyterHub.services.get_value([])
    roles = list(c.JupyterHub.load_roles) if culler else c.JupyterHub.load_roles.get_value([])
    assert services[-1] == {"name": "prestart", "api_token": "s3cret"}
    assert roles[-1] == {"name": "prestart", "services": ["prestart"],
                         "scopes": ["list:users", "read:users", "read:servers", "servers", "users:activity"]}
    assert len(services) == len(roles) == (2 if culler else 1)


# ----------------------------------------------------------------------------- the warm kernel

PROBE = ("import os, sys; print(os.getcwd(), os.environ.get('JPY_SESSION_NAME'), globals().get('__session__'), "
         "'xml.dom.minidom' in sys.modules, sorted(k for k in globals() if not k.startswith('_')))")


async def _run(km, kernel_id, code):
    client = km.get_kernel(kernel_id).client()
    client.start_channels()
    said = []
    try:
        await client.wait_for_ready(timeout=60)
        reply = await client.execute_interactive(code, timeout=60, output_hook=lambda m: said.append(
            m["content"].get("text", "") if m["header"]["msg_type"] == "stream" else ""))
    finally:
        client.stop_channels()
    return reply["content"]["execution_count"], "".join(said).strip()


def test_the_warm_kernel_goes_to_the_first_notebook_as_a_fresh_one_would(tmp_path):
    from rlhf_course.classroom.warm_kernels import WarmKernelManager
    (tmp_path / "rlhf").mkdir()
    (tmp_path / "runtime").mkdir()
    notebook = str(tmp_path / "rlhf" / "nb.ipynb")

    async def scenario():
        km = WarmKernelManager(root_dir=str(tmp_path), connection_dir=str(tmp_path / "runtime"),
                               warm_modules=["xml.dom.minidom", "no_such_module"])
        try:
            while km._warm is None:
                await asyncio.sleep(0.01)
            warm_id = await asyncio.shield(km._warm)
            assert warm_id in km and km.list_kernels() == []  # started, imported, not shown
            env = {**os.environ, "JPY_SESSION_NAME": notebook}  # as jupyter_server's SessionManager passes it
            taken = await km.start_kernel(path="rlhf", kernel_name="python3", env=env)
            assert taken == warm_id and [k["id"] for k in km.list_kernels()] == [warm_id]
            warm = await _run(km, taken, PROBE)
            fresh_id = await km.start_kernel(path="rlhf", kernel_name="python3", env=env)  # the next: fresh
            assert fresh_id != warm_id and len(km.list_kernels()) == 2
            fresh = await _run(km, fresh_id, PROBE)
            return warm, fresh
        finally:
            await km.shutdown_all(now=True)

    (warm_count, warm_said), (fresh_count, fresh_said) = asyncio.run(scenario())
    cwd = str(tmp_path / "rlhf")
    assert warm_count == fresh_count == 1  # the imports left no trace in the history
    assert warm_said.startswith(f"{cwd} {notebook} {notebook} True ")  # moved, named, the module there
    assert fresh_said.startswith(f"{cwd} {notebook} {notebook} False ")
    assert warm_said.split(" True ")[1] == fresh_said.split(" False ")[1]  # the same names, no more
