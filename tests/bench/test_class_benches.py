"""The pure parts of the class benches (bench/class_grading.py, bench/classroom.py): the synthetic class's
draw and the scores it must get, the check that finds what an export lost or mixed, and the figures'
computation.  The load runs themselves are benchmarks, not tests (their figures: bench/RESULTS.md)."""
import contextlib
import logging
import math
import os
import subprocess
import threading

import pytest

from bench import class_grading as cg
from bench import classroom as cr
from rlhf_course.grading import instructor
from tests.support.course import cell_points, repo_course

CATALOGUES = {base: instructor.load_module(repo_course(), name) for base, name in cg.CATALOGUES.items()}
CHECKS = {base: set(instructor.load_module(repo_course(), instructor.checks_module_name(base)).CHECKS) for base in cg.BASES}


def expected(submission):
    return cg.expected_score(submission, cell_points(submission.base), CHECKS[submission.base],
                             CATALOGUES[submission.base])


def test_the_draw_is_seeded_and_a_smaller_class_is_the_start_of_a_larger_one():
    big = cg.draw_class(300, 37, CATALOGUES)
    assert big == cg.draw_class(300, 37, CATALOGUES)
    assert cg.draw_class(30, 37, CATALOGUES) == big[:90]
    assert big != cg.draw_class(300, 38, CATALOGUES)
    assert [s.student for s in big[:3]] == ["s001"] * 3 and big[-1].student == "s300"


def test_the_class_holds_every_kind_of_submission_and_each_student_one_edition():
    drawn = cg.draw_class(300, 37, CATALOGUES)
    assert len(drawn) == 900 and {(s.student, s.base) for s in drawn} == {
        (f"s{i:03d}", b) for i in range(1, 301) for b in cg.BASES}
    for base in cg.BASES:
        kinds = {s.kind for s in drawn if s.base == base}
        assert kinds == ({"reference", "wrong", "variant"} if hasattr(CATALOGUES[base], "CORRECT_VARIANTS")
                         else {"reference", "wrong"}), base
    editions = {}
    for s in drawn:
        editions.setdefault(s.student, set()).add(s.assignment.endswith("_zh"))
    assert all(len(e) == 1 for e in editions.values())
    chinese = sum(e == {True} for e in editions.values())
    late, twice = sum(s.late for s in drawn), sum(s.resubmitted for s in drawn)
    assert 50 < chinese < 130 and 40 < late < 150 and 40 < twice < 150  # 30 %, 10 %, 10 % of a seeded draw


def test_the_score_a_submission_must_get_is_the_checks_points_less_what_its_mistake_loses():
    points = cell_points("rlhf")
    full = sum(points[g] for g in CHECKS["rlhf"])
    assert full == 44
    right = cg.Submission("s001", "rlhf", "rlhf_zh", "reference", "", False, False)
    variant = cg.Submission("s001", "rlhf", "rlhf", "variant", CATALOGUES["rlhf"].CORRECT_VARIANTS[0].name, True, False)
    wrong = CATALOGUES["rlhf"].WRONG_BY_NAME["ppo_clip_without_min"]
    mistaken = cg.Submission("s001", "rlhf", "rlhf", "wrong", wrong.name, True, False)
    assert expected(right) == expected(variant) == 44
    assert expected(mistaken) == 44 - sum(points[g] for g in wrong.loses) < 44
    assert cg.expected_penalty(mistaken, 1.0) == 1.0 and cg.expected_penalty(mistaken, 30) == 2.0
    assert cg.expected_penalty(right, 44) == 0.0
    with pytest.raises(ValueError, match="no checks of rlhf"):
        cg.expected_score(mistaken, points, CHECKS["rlhf"] - set(wrong.loses), CATALOGUES["rlhf"])


def exported(drawn):
    rows = []
    for s in drawn:
        score = expected(s)
        rows.append({"student_id": f"acct_{s.student}", "assignment": s.base, "edition": s.assignment,
                     "raw_score": str(score), "late_submission_penalty": str(cg.expected_penalty(s, score))})
    return rows


def test_an_export_that_lost_or_mixed_anything_is_named():
    drawn = cg.draw_class(4, 37, CATALOGUES)
    def check(rows):
        return cg.mismatches(drawn, rows, lambda s: f"acct_{s}", expected)
    assert check(exported(drawn)) == []
    rows = exported(drawn)
    rows[0]["raw_score"], rows[1]["student_id"] = "0.0", "acct_s099"  # a wrong score; a row under another student
    rows[2]["edition"] = rows[2]["edition"] + "_x"
    rows.append(dict(rows[3]))
    problems = check(rows)
    assert any("score 0.0, must be" in p for p in problems)
    assert any("('acct_s099'" in p and "never submitted" in p for p in problems)
    assert any(f"('acct_{drawn[1].student}', '{drawn[1].base}'): 0 exported rows" in p for p in problems)
    assert any("edition" in p for p in problems) and any(": 2 exported rows" in p for p in problems)
    late = next(i for i, s in enumerate(drawn) if s.late) if any(s.late for s in drawn) else None
    if late is not None:
        rows = exported(drawn)
        rows[late]["late_submission_penalty"] = "0.0"
        assert any("late penalty 0.0" in p for p in check(rows))


def test_cost_per_submission_and_flatness():
    assert cg.per_submission({"grade": 30.0, "total": 45.0}, 90) == pytest.approx({"grade": 1 / 3, "total": 0.5})
    figures = [{"size": 300, "x": 0.66}, {"size": 30, "x": 0.6}, {"size": 100, "x": 0.9}]
    assert cg.flatness(figures, "x") == pytest.approx(1.1)
    with pytest.raises(ValueError):
        cg.per_submission({"grade": 1.0}, 0)


def test_percentiles_arrivals_and_pauses():
    assert cr.percentile([3.0, 1.0, 2.0, 4.0, 5.0], 50) == 3.0
    assert cr.percentile(list(range(101)), 95) == pytest.approx(95.0)
    assert cr.percentile([1.0, 2.0], 95) == pytest.approx(1.95)
    assert math.isnan(cr.percentile([], 50))
    names = [f"s{i}" for i in range(40)]
    times = cr.arrivals(names, 5, 37)
    assert times == cr.arrivals(names, 5, 37) and all(0 <= t <= 300 for t in times.values())
    assert max(times.values()) > 200 and min(times.values()) < 100
    cells = [("setup", False), ("ppo_answer", True)] * 200
    waits = cr.pauses("s1", cells, 37, 1.0)
    assert waits == cr.pauses("s1", cells, 37, 1.0) != cr.pauses("s2", cells, 37, 1.0)
    reading, typing = sorted(waits[0::2]), sorted(waits[1::2])
    assert 3 < reading[100] < 5.5 and 22 < typing[100] < 40  # medians 4 s and 30 s
    assert cr.pauses("s1", cells, 37, 0.1) == pytest.approx([w * 0.1 for w in waits])
    brisk = cr.pauses("s1", cells, 37, 1.0, "brisk")
    assert brisk == cr.pauses("s1", cells, 37, 1.0, "brisk") and all(4 <= w <= 12 for w in brisk)
    assert min(brisk) < 4.5 and max(brisk) > 11.5 and 7 < sorted(brisk)[200] < 9  # uniform over 4-12 s
    with pytest.raises(ValueError, match="brisk"):
        cr.pauses("s1", cells, 37, 1.0, "leisurely")


def test_the_training_cells_slot_wait_is_read_from_its_own_words_in_either_language():
    from rlhf_course.i18n import t
    got, gave_up = ("Got a training slot after {seconds:.0f} s: training now",
                    "The training queue has not moved for {still:.0f} s (you waited {seconds:.0f} s): training now "
                    "without a slot")
    waiting = t("Waiting for a training slot: {ahead} ahead (the machine trains {slots} at a time)", ahead=3, slots=2)
    assert cr.slot_wait(f"{waiting}\n{t(got, seconds=23.4)}\nstep 1\n") == 23.0
    assert cr.slot_wait(t(got, language="zh-CN", seconds=7)) == 7.0
    assert cr.slot_wait(t(gave_up, language="zh-CN", still=180, seconds=410)) == 410.0
    assert cr.slot_wait(t(gave_up, still=180, seconds=395)) == 395.0
    assert cr.slot_wait("step 10 of 20\n") == 0.0


def test_a_run_is_summarised_and_item_3_judged():
    students = [cr.StudentFigures("a", spawn=2.0, cells=[0.1, 0.2, 0.3], training=40.0, training_wait=30.0,
                                  validate=5.0, validate_ok=True, submitted=True, cpu_seconds=50.0, memory_mib=700.0),
                cr.StudentFigures("b", spawn=4.0, cells=[0.4], failure="RuntimeError: boom")]
    loads = [(1.0, 1.0, 1.0), (3.0, 2.0, 1.0), (2.0, 2.0, 1.0)]
    f = cr.summarise(students, [0.01, 0.03], 20.0, 1, loads)
    assert f["cell_latency_s"]["p50"] == pytest.approx(0.25) and f["cell_latency_s"]["count"] == 4
    assert f["training_s"]["p50_over_alone"] == f["training_s"]["p95_over_alone"] == 2.0 and f["validate_failures"] == 1
    assert (f["training_s"]["waiting_p95"], f["training_s"]["training_p95"]) == (30.0, 10.0)
    assert f["failures"] == {"b": "RuntimeError: boom"} and (f["submitted"], f["collected"]) == (1, 1)
    assert f["load"]["peak_1min"] == 3.0 and f["spawn_s"]["max"] == 4.0
    assert "submitted / collected" in cr.table("lab", f)
    assert math.isnan(f["training_bound"]["measured_over_bound"])  # nobody's training start was recorded
    calm = dict(f, failures={}, students=1, cell_latency_s={"p95": 0.3})
    assert cr.isolation(calm, dict(calm, cell_latency_s={"p95": 0.42}))["ok"]
    assert not cr.isolation(calm, dict(calm, cell_latency_s={"p95": 0.48}))["within_1_5x"]
    assert cr.isolation(calm, dict(calm, collected=0))["lost_submissions"] == 1


def test_the_training_p95_is_set_beside_what_a_perfect_queue_gives_the_same_arrivals():
    # four trainings of 10 s alone, arriving together, two at a time: the perfect queue ends them at 10, 10, 20, 20 s
    students = [cr.StudentFigures(n, training=t, training_at=0.0) for n, t in zip("abcd", (12.0, 12.0, 30.0, 30.0))]
    f = cr.summarise(students, [], 10.0, 4, [(1.0, 1.0, 1.0)], slots=2)
    bound = f["training_bound"]
    assert bound["p50_over_alone"] == pytest.approx(1.5) and bound["p95_over_alone"] == pytest.approx(2.0)
    assert bound["measured_over_bound"] == pytest.approx(1.5)  # measured p95 3.0x alone over the bound's 2.0x
    assert "K=2: 1.50x / 2.00x; 1.50x (goal <= 1.5x)" in cr.table("lab", f)


def test_the_class_memory_peak_is_the_machines_simultaneous_peak_and_says_how_many_fit():
    # 24 GiB machine, 2 GiB in use before the hub, the class of 40 peaks at 18 GiB: 400 MiB a student,
    # and 75 % of 24 GiB = 18 GiB holds (18432 - 2048) / 400 = 40.96 -> 40 students
    samples = [6000.0, 18432.0, 12000.0]
    m = cr.machine_memory(samples, before_hub=2048.0, total=24576.0, students=40)
    assert m["peak_mib"] == 18432.0 and m["peak_share"] == pytest.approx(0.75)
    assert m["per_student_mib"] == pytest.approx(409.6) and m["students_within_goal"] == 40
    line = cr.memory_line(m)
    assert "18.0 of 24.0 GiB (75 %; goal <= 75 %)" in line and "40 students within the goal" in line
    assert 0 < cr.machine_used_mib() < cr.machine_total_mib()  # read from this machine's /proc/meminfo


def test_a_failed_validate_is_a_failure_the_student_saw_even_if_they_submitted():
    students = [cr.StudentFigures("ok", validate=3.0, validate_ok=True, submitted=True),
                cr.StudentFigures("told_wrong", validate=124.0, validate_ok=False, submitted=True,
                                  validate_problem="failed: 1 (first: 'NameError')"),
                cr.StudentFigures("broke", failure="RuntimeError: spawn failed")]
    f = cr.summarise(students, [], 10.0, 2, [(1.0, 1.0, 1.0)])
    assert set(f["failures"]) == {"told_wrong", "broke"} and "NameError" in f["failures"]["told_wrong"]
    assert f["validate_failures"] == 2 and f["submitted"] == 2
    failures_row = next(line for line in cr.table("lab", f).splitlines() if line.strip().startswith("failures"))
    assert failures_row.split()[1] == "2", failures_row  # the summary's count


def test_validate_answers_read_as_the_lab_reads_them():
    assert cr.validate_verdict({"success": True, "value": '{"passed": [1, 2]}'}) == (True, "")
    assert cr.validate_verdict({"success": True, "value": {"failed": [{"source": "x"}]}}) == (False, "failed: 1 (first: 'x')")
    assert cr.validate_verdict({"success": True, "value": {"failed": [{"source": "x", "error": "No response"}]}})[1] == \
        "failed: 1 (first: 'No response')"
    assert cr.validate_verdict({"success": False, "value": "Traceback ..."})[0] is False


@contextlib.contextmanager
def pinging_websocket_server(ping_ms: int, timeout_ms: int):
    """A websocket echo server that pings and drops a silent client as Jupyter Server's kernel websocket does
    (its WebSocketMixin, with the pings every ``ping_ms`` instead of 30 s): yields its ws:// address."""
    import asyncio
    from jupyter_server.base.websocket import WebSocketMixin
    from tornado import web, websocket

    class Echo(WebSocketMixin, websocket.WebSocketHandler):
        log = logging.getLogger("pinging_websocket_server")

        def on_message(self, message):
            self.write_message(message)

    ready, state = threading.Event(), {}

    def serve():
        loop = asyncio.new_event_loop()
        asyncio.set_event_loop(loop)
        app = web.Application([("/ws", Echo)], ws_ping_interval=ping_ms, ws_ping_timeout=timeout_ms,
                              allow_unauthenticated_access=True)
        server = app.listen(0, "127.0.0.1")
        state.update(loop=loop, port=next(iter(server._sockets.values())).getsockname()[1])
        ready.set()
        loop.run_forever()
        server.stop()
        loop.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    ready.wait(10)
    try:
        yield f"ws://127.0.0.1:{state['port']}/ws"
    finally:
        state["loop"].call_soon_threadsafe(state["loop"].stop)
        thread.join(10)


def test_a_students_pause_keeps_the_kernel_websocket_open_as_a_browser_does():
    """s039 of the lab session of 40: a pause of 86 s after its first cell without reading the websocket, and the
    server (pinging every 30 s, dropping a client silent for 90 s) closed it.  Here in miniature: 0.1 s and 0.3 s."""
    import websocket
    with pinging_websocket_server(ping_ms=100, timeout_ms=300) as url:
        silent = websocket.create_connection(url, timeout=5)
        reading = websocket.create_connection(url, timeout=5)
        # meanwhile ``silent`` waits as the old harness did (stop.wait), nobody reading it
        assert cr.keep_reading(reading, 0.8, threading.Event(), 5) is False
        try:
            silent.send("cell")
            closed = silent.recv() == ""  # the close frame: the failure s039 met
        except (OSError, websocket.WebSocketException):
            closed = True
        assert closed
        reading.send("cell")
        assert reading.recv() == "cell" and reading.timeout == 5
        stop = threading.Event()
        stop.set()
        assert cr.keep_reading(reading, 5, stop, 5) is True  # Ctrl-C stops the pause at once


def test_a_second_run_waits_for_the_first_it_would_remove_the_accounts_of(tmp_path):
    import subprocess
    import sys
    path = tmp_path / "bench.lock"
    first = cr.one_class_at_a_time(path)
    second = subprocess.Popen([sys.executable, "-c", "import sys; sys.path.insert(0, '.'); from pathlib import Path; "
                               "from bench import classroom as cr; "
                               f"cr.one_class_at_a_time(Path({str(path)!r})); print('ran', flush=True)"],
                              stdout=subprocess.PIPE, text=True, cwd=cr.REPO)
    said = second.stdout.readline()
    assert said.startswith(f"another bench/classroom.py run holds {path} (pid {os.getpid()}, since ")
    assert second.poll() is None  # waiting
    first.close()
    assert second.stdout.readline() == "ran\n" and second.wait(10) == 0


def test_the_ideal_replay_of_trainings_queues_them_on_the_cores():
    from bench import training_bound
    assert training_bound.replay([0, 0, 0, 0], 10, cores=2) == [10, 10, 20, 20]  # two at a time
    assert training_bound.replay([0, 5, 30], 10, cores=2) == [10, 10, 10]  # never more than two: nobody waits
    assert training_bound.replay([0, 0, 0, 0], 10, cores=2, pair_factor=1.5) == [15, 15, 30, 30]
    assert training_bound.replay([0, 0], 10, cores=1) == [10, 20]


def test_a_stopped_hub_leaves_its_logs_and_every_servers_beside_the_runs_figures(tmp_path):
    """--json RUN.json keeps the hub's log, make hub's and each server's own (hub/servers/<user>.log): the
    classroom removes its folder, and what a server said before it died is in its own log only."""
    hub = cr.Hub.__new__(cr.Hub)
    hub.scratch = tmp_path / "scratch"
    hub.base = hub.scratch / "classroom"
    (hub.base / "hub" / "servers").mkdir(parents=True)
    (hub.base / "hub" / "jupyterhub.log").write_text("the hub's line\n")
    (hub.base / "hub" / "servers" / "rlhfcr_ann.log").write_text("ann's server's line\n")
    hub.log = open(hub.scratch / "make-hub.log", "w+")
    hub.process = subprocess.Popen(["true"], start_new_session=True)
    hub.process.wait()
    kept = tmp_path / "kept" / "run.json"
    kept.parent.mkdir()
    hub.stop(keep_logs=kept)
    assert (kept.parent / "run.jupyterhub.log").read_text() == "the hub's line\n"
    assert (kept.parent / "run.servers" / "rlhfcr_ann.log").read_text() == "ann's server's line\n"
    assert (kept.parent / "run.make-hub.log").exists() and not hub.scratch.exists()
