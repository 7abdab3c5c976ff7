"""A Dask batch whose workers are gone (never started, or killed mid-batch): it says what it waits for while it
waits, stops after c.TrustedGrading.dask_worker_wait with the next step, and loses nothing: what was graded is
recorded as any batch's, the gradebook rows of the submissions not graded stay as they were.  A scheduler and
its workers run in this process (distributed's LocalCluster); the grading itself is the in-process double's.
tests/grading/test_scaling.py grades on a real cluster of worker processes."""
import re
import time

import pytest

from rlhf_course.course.limits import Limits
from rlhf_course.course.settings import Course
from rlhf_course.grading import app, batch, examples
from rlhf_course.course import notebooks
from tests.support.course import copy_course, release_course
from tests.support.in_process_sandbox import InProcessSandbox, grade_in_process

KL, KL_NOTEBOOK = "kl_penalty", "kl_penalty.ipynb"


def local_cluster(workers: int, threads: int = 1):
    from distributed import LocalCluster
    return LocalCluster(n_workers=workers, threads_per_worker=threads, processes=False, dashboard_address=":0")


def notices(said: str) -> list[str]:
    return [line for line in said.splitlines() if line.startswith("waiting for")]


def test_a_batch_with_no_worker_says_it_waits_then_stops_with_the_next_step(capsys):
    task = batch.Task(KL, KL_NOTEBOOK, "ada")
    with local_cluster(workers=0) as cluster:
        started = time.monotonic()
        with pytest.raises(batch.BatchStopped) as stopped:
            list(batch.grade_on_dask(None, [task], cluster.scheduler_address, Limits(), worker_wait=2.0))
        waited = time.monotonic() - started
    said = capsys.readouterr().err
    assert 2.0 <= waited < 10
    lines = notices(said)
    assert len(lines) >= 3, said  # every quarter of the wait
    for line in lines:
        assert f"waiting for a Dask worker: none is connected to {cluster.scheduler_address}" in line
        assert "0 of 1 submissions graded and recorded" in line and f"`dask worker {cluster.scheduler_address}" in line
        assert "c.TrustedGrading.dask_worker_wait" in line and "Ctrl-C" in line
    stop_in = [int(re.search(r"stops in (\d+) s", line).group(1)) for line in lines]
    assert stop_in == sorted(stop_in, reverse=True)  # how long is left, counting down
    message = str(stopped.value)
    assert message.startswith(f"no Dask worker connected to {cluster.scheduler_address} for 2 s")
    assert "0 of 1 submissions were graded and recorded, the other 1 not graded" in message
    assert "Start the workers" in message and "`sudo make grade` again" in message


@pytest.fixture(scope="module")
def course(tmp_path_factory):
    """A released course with two kl_penalty submissions graded once on this machine: ada's wrong, bob's right."""
    folder = release_course(copy_course(tmp_path_factory.mktemp("dask_waits") / "course"))
    handle = Course.at(folder)
    source = notebooks.read(folder / "source" / KL / KL_NOTEBOOK)
    wrong = "def kl_estimator_k3(log_p, ref_log_p):\n    return 0 * log_p\n"
    examples.write_submission(handle, "ada", {"kl_answer": wrong}, assignment=KL, notebook=KL_NOTEBOOK)
    examples.write_submission(handle, "bob", notebooks.solution_answers(source), assignment=KL, notebook=KL_NOTEBOOK)
    grade_in_process(handle, assignments=[KL])
    return folder


def recorded(folder):
    """Each student's score in the gradebook, their feedback page and their grading_report.csv row."""
    from nbgrader.api import Gradebook
    handle = Course.at(folder)
    with Gradebook(handle.db_url) as gb:
        scores = {s.student.id: s.score for s in gb.assignment_submissions(KL)}
    pages = {student: (handle.folder("feedback", student, KL) / "kl_penalty.html").read_text()
             for student in ("ada", "bob")}
    rows = {line.split(",")[2]: line for line in (folder / "grading_report.csv").read_text().splitlines()[1:]}
    return scores, pages, rows


def grade_on_a_cluster_where(folder, monkeypatch, on_worker, workers: int = 1, threads: int = 2):
    """`grade_all` of kl_penalty on a local cluster whose workers run ``on_worker(course, task, limits)`` in place
    of trusted grading in a sandbox; what it raised (None if nothing) and what it said on stderr."""
    handle = Course.at(folder).with_config(TrustedGrading={"dask_worker_wait": 2.0})
    monkeypatch.setattr(batch, "_grade_on_dask_worker", on_worker)
    with local_cluster(workers, threads) as cluster:
        try:
            grade_in_process(handle, assignments=[KL], dask_address=cluster.scheduler_address)
        except batch.BatchStopped as exc:
            return exc
    return None


def graded_here(course, task, limits):
    from dataclasses import asdict
    from rlhf_course.grading.assignment import resolve
    from rlhf_course.grading.trusted import grade_submission
    return asdict(grade_submission(course, resolve(course, task.assignment), task.student, task.notebook, 0, limits,
                                   InProcessSandbox))


def test_workers_killed_mid_batch_stop_it_and_the_ungraded_keep_their_grades(course, monkeypatch, capsys):
    """ada is graded again (now right); bob's worker dies while it grades him, and none is left."""
    from distributed import get_worker

    source = notebooks.read(course / "source" / KL / KL_NOTEBOOK)
    examples.write_submission(Course.at(course), "ada", notebooks.solution_answers(source), assignment=KL,
                              notebook=KL_NOTEBOOK)
    scores, pages, rows = recorded(course)
    assert scores["bob"] == 8 and scores["ada"] < 8
    feedback_of_ada = Course.at(course).folder("feedback", "ada", KL) / "kl_penalty.html"

    def on_worker(handle, task, limits):
        if task.student == "ada":
            return graded_here(handle, task, limits)
        deadline = time.monotonic() + 30
        while feedback_of_ada.read_text() == pages["ada"] and time.monotonic() < deadline:
            time.sleep(0.05)  # until ada's new grade is recorded
        worker = get_worker()
        worker.loop.add_callback(worker.close)  # as a worker killed: its task goes back to the scheduler
        time.sleep(1)
        return graded_here(handle, task, limits)

    stopped = grade_on_a_cluster_where(course, monkeypatch, on_worker)
    assert stopped is not None and "1 of 2 submissions were graded and recorded, the other 1 not graded" in str(stopped)
    said = capsys.readouterr().err
    assert notices(said) and "waiting for a Dask worker: none is connected to" in notices(said)[-1]
    assert "1 of 2 submissions graded and recorded" in notices(said)[-1]
    after, after_pages, after_rows = recorded(course)
    assert after == {"ada": 8, "bob": 8}  # ada's new grade is in; bob's, not graded again, is as it was
    assert (after_pages["bob"], after_rows["bob"]) == (pages["bob"], rows["bob"])
    assert after_pages["ada"] != pages["ada"] and after_rows["ada"] != rows["ada"]
    assert "ada" in (course / "grades.csv").read_text()


def test_a_task_that_fails_on_the_cluster_is_not_scored_and_is_named_at_the_end(course, monkeypatch):
    scores, pages, _ = recorded(course)

    def on_worker(handle, task, limits):
        if task.student == "bob":
            raise FileNotFoundError(f"{handle.root} is not mounted on this worker")
        return graded_here(handle, task, limits)

    stopped = grade_on_a_cluster_where(course, monkeypatch, on_worker)
    message = str(stopped)
    assert "1 of 2 submissions were graded and recorded; 1 were not" in message
    assert "bob (kl_penalty): its Dask task failed: FileNotFoundError:" in message and "is not mounted" in message
    assert f"grade {KL} --student=bob --dask=" in message
    after, after_pages, _ = recorded(course)
    assert after["bob"] == scores["bob"] and after_pages["bob"] == pages["bob"]  # never a 0 for what never ran


def test_the_command_says_the_batch_stopped_not_that_it_did_not_run(monkeypatch, capsys):
    def stops(self):
        raise batch.BatchStopped("1 of 2 submissions were graded and recorded")
    monkeypatch.setattr(app.RlhfGrader, "initialize", lambda self, argv=None: None)
    monkeypatch.setattr(app.RlhfGrader, "start", stops)
    assert app.main(["grade"]) == 2
    assert "stopped: 1 of 2 submissions were graded and recorded" in capsys.readouterr().err


def test_a_scheduler_that_cannot_be_reached_is_said_while_it_waits_and_named_when_it_gives_up(capsys):
    """A wrong address or a scheduler that is down: distributed retries in silence for its connect timeout (30 s by
    default), then raised an OSError that reached the instructor as a traceback."""
    import dask

    from tests.support.browser import free_port
    address = f"tcp://127.0.0.1:{free_port()}"
    with dask.config.set({"distributed.comm.timeouts.connect": "1s"}):
        with pytest.raises(batch.NotReady) as refused:
            list(batch.grade_on_dask(None, [batch.Task(KL, KL_NOTEBOOK, "ada")], address, Limits()))
    assert f"connecting to the Dask scheduler at {address} (waiting up to 1 s" in capsys.readouterr().err
    said = str(refused.value)
    assert said.startswith(f"could not reach the Dask scheduler at {address}: ")
    assert "`dask scheduler` runs there" in said and "nothing was graded" in said


def test_a_local_batch_closed_early_grades_nothing_more(monkeypatch, capsys):
    """Ctrl-C (or any stop) while sandboxes grade on this machine: the queued submissions are not graded for nothing
    before the command ends (the thread pool's exit used to run every one of them, unrecorded)."""
    import threading

    import torch

    started = []

    def slow_grade(course, assignment, student, notebook, slot, limits, sandbox):
        started.append(student)
        time.sleep(0.2)
        return batch.SubmissionResult(student, "graded", assignment="a", notebook=notebook)

    monkeypatch.setattr(batch, "grade_submission", slow_grade)
    tasks = [batch.Task("a", "a.ipynb", f"s{i:02}") for i in range(20)]
    threads = torch.get_num_threads()
    try:
        source = batch.grade_locally(None, {"a": None}, tasks, 2, Limits(), InProcessSandbox)
        next(source)
        clock = time.monotonic()
        source.close()  # what a KeyboardInterrupt in the loop over it does
        assert time.monotonic() - clock < 1.5
    finally:
        torch.set_num_threads(threads)
    assert len(started) <= 4, started  # the two running when it closed, perhaps two more: never the 20
    said = capsys.readouterr().err
    assert re.search(r"stopping: waiting for the [12] sandbox\(es\) grading now to end \(at most 300 s", said), said
    assert not [t for t in threading.enumerate() if t.name.startswith("ThreadPoolExecutor") and t.is_alive()]


def test_ctrl_c_mid_batch_writes_what_was_graded_and_says_it_stopped(course, monkeypatch):
    scores, pages, rows = recorded(course)

    def first_then_ctrl_c(handle, assignments, tasks, workers, limits, sandbox):
        [ada] = [task for task in tasks if task.student == "ada"]
        yield batch.result_from_dict(graded_here(handle, ada, limits))
        raise KeyboardInterrupt

    (course / "grading_report.csv").write_text((course / "grading_report.csv").read_text().replace(rows["ada"], ""))
    monkeypatch.setattr(batch, "grade_locally", first_then_ctrl_c)
    with pytest.raises(batch.BatchStopped) as stopped:
        grade_in_process(Course.at(course), assignments=[KL])
    assert str(stopped.value).startswith("interrupted (Ctrl-C): 1 of 2 submissions were graded and recorded")
    after, after_pages, after_rows = recorded(course)
    assert after["bob"] == scores["bob"] and after_pages["bob"] == pages["bob"] and after_rows["bob"] == rows["bob"]
    assert "ada" in after_rows  # the report has the submission graded before the stop


def test_a_scheduler_lost_mid_batch_is_one_readable_line(monkeypatch, capsys):
    """The scheduler killed while its workers grade: the client's futures are cancelled; the batch stopped with
    distributed's whole exception (every future's key, on several lines) inside its message, under a traceback
    distributed logged for each failed reconnect."""
    import threading

    def slow(course, task, limits):
        time.sleep(3)
        return {}

    monkeypatch.setattr(batch, "_grade_on_dask_worker", slow)
    tasks = [batch.Task(KL, KL_NOTEBOOK, student) for student in ("ada", "bob")]
    import dask

    # the worker left without a scheduler gives up reconnecting within its connect timeout: the cluster closes soon
    with dask.config.set({"distributed.comm.timeouts.connect": "2s"}), local_cluster(workers=1) as cluster:
        threading.Timer(1.0, lambda: cluster.sync(cluster.scheduler.close)).start()
        with pytest.raises(batch.BatchStopped) as stopped:
            list(batch.grade_on_dask(None, tasks, cluster.scheduler_address, Limits(), worker_wait=20))
    message = str(stopped.value)
    assert message.startswith(f"the connection to the Dask scheduler at {cluster.scheduler_address} was lost ")
    assert "0 of 2 submissions were graded and recorded" in message
    assert "\n" not in message and "_grade_on_dask_worker-" not in message
    assert "Traceback" not in capsys.readouterr().err
