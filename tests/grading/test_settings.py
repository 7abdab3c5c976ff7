"""The course's settings live in nbgrader_config.py beside nbgrader's own, and every one given on the command line
reaches where it acts: one release and one grading (the in-process sandbox double), no root, no sandbox."""
import contextlib
import dataclasses
import io
import os
import pickle
import shutil

import pytest

from rlhf_course.grading import app
from rlhf_course.course.limits import Limits
from rlhf_course.course.settings import Course, TrustedGrading
from tests.support.course import REPO, copy_course
from tests.support.in_process_sandbox import InProcessSandbox


@pytest.fixture
def course(tmp_path):
    root = copy_course(tmp_path / "course")
    with open(root / "nbgrader_config.py", "a") as config:
        config.write("\nc.TrustedGrading.workers = 3\nc.TrustedGrading.call_seconds = 7.5\n"
                     "c.TrustedGrading.dask_address = 'tcp://scheduler:8786'\n")
    return root


def test_the_config_file_sets_the_grader_and_leaves_the_rest_at_their_defaults(course, repo):
    course_settings, grading = Course.at(course).settings()
    assert (grading.workers, grading.call_seconds, grading.dask_address) == (3, 7.5, "tcp://scheduler:8786")
    assert (grading.feedback_seconds, grading.submission_seconds) == (Limits.feedback_seconds, Limits.submission_seconds)
    # the repository's nbgrader_config.py: RLHF_DUE_DATE (the tests set one far away) or its own date
    assert course_settings.due_date == os.environ.get("RLHF_DUE_DATE", "2026-12-18 23:59:00 UTC")
    untouched = Course.at(repo).settings()[1]
    assert (untouched.workers, untouched.call_seconds, untouched.dask_address) == (0, Limits.call_seconds, "")


def _grade_command(argv: list[str]):
    command = app.RlhfGrader()
    command.initialize(["grade", *argv])
    return command.subapp


def test_a_command_line_option_wins_over_the_file(course):
    command = _grade_command([f"--course-root={course}", "--call-seconds=2", "--workers=1", "--TrustedGrading.cells=50"])
    grading = command.course.settings()[1]
    limits = grading.limits()
    assert (limits.call_seconds, limits.cells, limits.submission_seconds, grading.workers, grading.dask_address) == \
        (2.0, 50, Limits.submission_seconds, 1, "tcp://scheduler:8786")
    grading = _grade_command([f"--course-root={course}"]).course.settings()[1]
    assert (grading.limits().call_seconds, grading.workers) == (7.5, 3)


def test_help_all_lists_every_setting_and_limit_with_its_default(capsys):
    assert app.main(["grade", "--help-all"]) == 0
    shown = capsys.readouterr().out
    for name in ("RlhfCourse.due_date", "TrustedGrading.workers", "TrustedGrading.dask_address",
                 *(f"TrustedGrading.{limit.name}" for limit in dataclasses.fields(Limits))):
        assert f"--{name}=" in shown, name
    assert "Default: 300.0" in shown


def test_trusted_grading_has_one_setting_per_limit_with_the_limit_s_default_and_help():
    """TrustedGrading states its limit settings one by one: none missing, none extra, each as Limits declares it."""
    own = {"workers", "dask_address", "dask_worker_wait", "cache_directory", "name_misconceptions"}
    settings = TrustedGrading.class_traits(config=True)
    fields = {limit.name: limit for limit in dataclasses.fields(Limits)}
    assert sorted(set(settings) - own) == sorted(fields)
    for name, limit in fields.items():
        setting = settings[name]
        assert (setting.default_value, setting.help) == (limit.default, limit.metadata["help"]), name
        assert type(setting.default_value) is type(limit.default), name  # an Integer for an int, a Float for a float
    assert TrustedGrading().limits() == Limits()

# ----------------------------------------------------------------------------- every setting, from the command line

KL, KL_NOTEBOOK = "kl_penalty", "kl_penalty.ipynb"
# Every CourseDirectory setting the course uses, moved: the configuration files stay in one folder, the course
# (its root) in another, each step's folder renamed, the gradebook outside both, another course id, a file pattern
# the release leaves out.
FOLDERS = {"source_directory": "src", "release_directory": "handout", "submitted_directory": "inbox",
           "autograded_directory": "marked", "feedback_directory": "returned"}
COURSE_ID = "another-course"
DUE = "2099-06-01 12:00:00 UTC"


def _moved(value):
    """A value of a limit's type that differs from its default (and still lets an honest submission pass)."""
    return value + 1 if isinstance(value, int) else value + 0.5


LIMITS = {limit.name: _moved(limit.default) for limit in dataclasses.fields(Limits)}
GRADING = {"workers": 3, "name_misconceptions": False, **LIMITS}


class RecordingSandbox:
    """The in-process sandbox double, noting what each sandbox it starts is given."""
    seen: list = []

    def __new__(cls, job, slot=0, limits=Limits(), deadline=None, cache_directory=None):
        cls.seen.append({"limits": limits, "cache_directory": cache_directory})
        return InProcessSandbox(job, slot, limits, deadline, cache_directory)

    @staticmethod
    def unavailable():
        return None


def _on_the_command_line(settings: dict[str, dict]) -> list[str]:
    return [f"--{section}.{name}={value}" for section, values in settings.items() for name, value in values.items()]


@pytest.fixture(scope="module")
def moved(tmp_path_factory):
    """The release and a grading run with every setting given on the command line (none in a file)."""
    import torch

    from rlhf_course.grading import batch, examples, trusted
    from rlhf_course.course import notebooks

    top = tmp_path_factory.mktemp("settings")
    config_only = top / "config"  # --course-root: where the configuration files are read
    config_only.mkdir()
    shutil.copy2(REPO / "nbgrader_config.py", config_only / "nbgrader_config.py")
    course = copy_course(top / "course")  # --CourseDirectory.root: where the course is
    (course / "source").rename(course / FOLDERS["source_directory"])
    (course / FOLDERS["source_directory"] / KL / "notes.scratch").write_text("kept out by CourseDirectory.ignore")
    (course / FOLDERS["source_directory"] / KL / "data.txt").write_text("released")
    db_url = f"sqlite:///{top / 'elsewhere.db'}"
    cache = top / "grading-cache"
    course_directory = {"root": course, "db_url": db_url, "course_id": COURSE_ID, "ignore": "*.scratch", **FOLDERS}
    argv = [f"--course-root={config_only}", *_on_the_command_line({"CourseDirectory": course_directory,
                                                                    "RlhfCourse": {"due_date": DUE}})]
    assert app.main(["release", *argv, KL]) == 0

    released = app.RlhfGrader()
    released.initialize(["grade", *argv])
    source = released.subapp.course.folder("source", assignment=KL) / KL_NOTEBOOK
    examples.write_submission(released.subapp.course, "ada", notebooks.solution_answers(notebooks.read(source)),
                              assignment=KL, notebook=KL_NOTEBOOK)

    seen = {"grade_locally": [], "take_in": [], "name_misconceptions": []}
    patch = pytest.MonkeyPatch()
    real_grade_all, real_grade_locally, real_take_in = batch.grade_all, batch.grade_locally, trusted.take_in

    def grade_locally(course, assignments, tasks, workers, limits, sandbox):
        seen["grade_locally"].append({"workers": workers, "limits": limits})
        return real_grade_locally(course, assignments, tasks, workers, limits, sandbox)

    def take_in(folder, notebook, release_nb, limits):
        seen["take_in"].append({"folder": folder, "limits": limits})
        return real_take_in(folder, notebook, release_nb, limits)

    RecordingSandbox.seen = []
    patch.setattr(batch, "grade_all", lambda *a, **k: real_grade_all(*a, **{**k, "sandbox": RecordingSandbox,
                                                                           "show_progress": False}))
    patch.setattr(batch, "grade_locally", grade_locally)
    patch.setattr(trusted, "take_in", take_in)
    real_name_misconceptions = trusted.name_misconceptions
    patch.setattr(trusted, "name_misconceptions", lambda *a: seen["name_misconceptions"].append(a) or real_name_misconceptions(*a))
    threads = torch.get_num_threads()
    command = app.RlhfGrader()
    try:
        command.initialize(["grade", *argv, *_on_the_command_line({"TrustedGrading": {**GRADING,
                                                                                     "cache_directory": cache}}), KL])
        printed = io.StringIO()
        with contextlib.redirect_stdout(printed):
            command.start()
    finally:
        patch.undo()
        torch.set_num_threads(threads)
    return {"top": top, "config": config_only, "course": course, "db_url": db_url, "cache": cache,
            "command": command.subapp, "printed": printed.getvalue(), "seen": {**seen, "sandbox": RecordingSandbox.seen}}


def test_the_course_directory_settings_reach_the_release(moved):
    from nbgrader.api import Gradebook

    course = moved["course"]
    assert sorted(p.name for p in (course / "handout" / KL).iterdir()) == ["data.txt", KL_NOTEBOOK]  # not notes.scratch
    assert not (course / "release").exists() and not (course / "source").exists()
    assert sorted(p.name for p in moved["config"].iterdir()) == ["nbgrader_config.py"]  # nothing written by the files' folder
    with Gradebook(moved["db_url"]) as gradebook:  # root, db_url, course_id and the due date, where nbgrader keeps them
        assignment = gradebook.find_assignment(KL)
        assert (assignment.course_id, str(assignment.duedate)) == (COURSE_ID, "2099-06-01 12:00:00")
        assert [nb.name for nb in assignment.notebooks] == [KL_NOTEBOOK.removesuffix(".ipynb")]


def test_the_course_directory_settings_reach_the_grader(moved):
    from nbgrader.api import Gradebook

    course, seen = moved["course"], moved["seen"]
    assert [call["folder"] for call in seen["take_in"]] == [course / "inbox" / "ada" / KL]  # submitted_directory
    assert (course / "returned" / "ada" / KL / "kl_penalty.html").is_file()  # feedback_directory
    assert (course / "marked" / "ada" / KL / KL_NOTEBOOK).is_file()  # autograded_directory
    assert (course / "grading_report.csv").is_file() and (course / "grades.csv").is_file()  # root
    for default in ("submitted", "autograded", "feedback", "gradebook.db"):
        assert not (course / default).exists() and not (moved["config"] / default).exists(), default
    with Gradebook(moved["db_url"]) as gradebook:  # db_url: the scores are in the gradebook the command names
        submission = gradebook.find_submission(KL, "ada")
        assert submission.score == submission.max_score > 0
    assert f"gradebook: {moved['db_url']};" in moved["printed"]


def test_every_trusted_grading_setting_reaches_where_it_acts(moved):
    seen = moved["seen"]
    expected = Limits(**LIMITS)
    assert expected != Limits() and all(getattr(expected, name) != getattr(Limits(), name) for name in LIMITS)
    assert seen["grade_locally"] == [{"workers": GRADING["workers"], "limits": expected}]  # workers; the batch's limits
    assert [call["limits"] for call in seen["take_in"]] == [expected]  # intake's sizes and cell count
    assert seen["sandbox"] and all(s == {"limits": expected, "cache_directory": moved["cache"]} for s in seen["sandbox"])
    assert seen["name_misconceptions"] == []  # turned off: the catalogue is never consulted
    assert set(GRADING) | {"cache_directory", "dask_address", "dask_worker_wait"} == \
        set(TrustedGrading.class_trait_names(config=True))


def test_the_cache_directory_holds_the_font_list_every_sandbox_reads(tmp_path):
    from rlhf_course.grading.sandbox.sandbox import FIRST_UID, Sandbox, bwrap_command, zygote_command
    from rlhf_course.grading.sandbox.zygote import FONT_MOUNTS

    fonts = tmp_path / "matplotlib" / "fontlist-v390.json"
    fonts.parent.mkdir()
    fonts.write_text("{}")  # built already: nothing is run
    command = bwrap_command(FIRST_UID, {}, Limits(), cache_directory=tmp_path)
    assert str(fonts) == command[command.index("/tmp/matplotlib/fontlist-v390.json") - 1]
    zygote = zygote_command({}, [], tmp_path)  # what grading forks every sandbox from binds the same list
    assert str(fonts) == zygote[zygote.index(f"{FONT_MOUNTS}/fontlist-v390.json") - 1]
    assert Sandbox({}, cache_directory=tmp_path).cache_directory == tmp_path


def test_the_dask_address_and_the_whole_course_reach_the_workers(moved, monkeypatch):
    import distributed

    from rlhf_course.grading import batch
    from rlhf_course.course import settings

    sent = []
    monkeypatch.setattr(batch, "grade_on_dask", lambda course, tasks, address, limits, worker_wait: sent.append(
        (course, tasks, address, limits, worker_wait)) or iter(()))
    command = app.RlhfGrader()
    command.initialize(["grade", f"--course-root={moved['config']}", f"--CourseDirectory.root={moved['course']}",
                        f"--CourseDirectory.db_url={moved['db_url']}", "--TrustedGrading.dask_address=tls://scheduler:8786",
                        "--TrustedGrading.call_seconds=4.5", "--TrustedGrading.dask_worker_wait=90",
                        *_on_the_command_line({"CourseDirectory": FOLDERS}), KL])
    import dask
    with dask.config.set({setting: "/etc/rlhf-grading/file.pem" for setting in batch.DASK_TLS_SETTINGS}):
        batch.grade_all(command.subapp.course, show_progress=False, export=False)  # tls://: certificates set
    [(course, tasks, address, limits, worker_wait)] = sent
    assert (address, limits.call_seconds, worker_wait, [t.student for t in tasks]) == \
        ("tls://scheduler:8786", 4.5, 90, ["ada"])

    # what a worker receives: the command's Course, pickled, settings and all (the worker reads no file)
    on_worker = pickle.loads(pickle.dumps(course))
    received = []
    monkeypatch.setattr(distributed, "get_worker", lambda: type("Worker", (), {"address": "tls://worker:1"}))
    monkeypatch.setattr(batch, "grade_submission", lambda course, assignment, *rest: received.append(
        (course, assignment, rest)) or batch.SubmissionResult("ada", "graded"))
    monkeypatch.setattr(settings, "course_config", lambda root: pytest.fail("a worker read the configuration files"))
    batch._grade_on_dask_worker(on_worker, tasks[0], limits)
    [(worker_course, assignment, rest)] = received
    assert (worker_course.db_url, worker_course.root, worker_course.folder("submitted", "ada", KL)) == \
        (moved["db_url"], moved["course"], moved["course"] / "inbox" / "ada" / KL)
    assert assignment.release_folder == moved["course"] / "handout" / KL and rest[-1] == limits


def test_a_course_with_a_setting_changed_leaves_the_commands_course_as_it_was(repo, monkeypatch):
    monkeypatch.delenv("RLHF_ALLOW_STOCK_AUTOGRADE", raising=False)
    course = Course.at(repo)
    allowed = course.with_config(TrustedGradingOnly={"allow": True})  # what the example class's stock autograde uses
    assert (allowed.config.TrustedGradingOnly.allow, course.config.TrustedGradingOnly.allow) == (True, False)
    assert pickle.loads(pickle.dumps(allowed)) == allowed


def test_a_tls_scheduler_without_the_clients_certificate_is_refused_with_what_to_set(monkeypatch):
    """Without the CA and client certificate in Dask's configuration (sudo drops the DASK_* variables), grading on a
    tls:// scheduler stops before connecting, naming the variables, not with distributed's TypeError."""
    import dask

    from rlhf_course.grading import batch
    from rlhf_course.course.settings import NotReady

    unset = {setting: None for setting in batch.DASK_TLS_SETTINGS}
    with dask.config.set(unset):
        with pytest.raises(NotReady) as refused:
            next(batch.grade_on_dask(None, [], "tls://scheduler:8786", None))
        assert "DASK_DISTRIBUTED__COMM__TLS__CLIENT__CERT" in str(refused.value)
        assert "DASK_DISTRIBUTED__COMM__TLS__CA_FILE" in str(refused.value)
        assert "--preserve-env=RLHF_GRADEBOOK_URL,DASK_DISTRIBUTED__COMM__TLS__CA_FILE," in str(refused.value)
        assert batch.dask_tls_problem("tcp://scheduler:8786") is None  # no TLS asked for: the warning's business
    given = {setting: "/etc/rlhf-grading/file.pem" for setting in batch.DASK_TLS_SETTINGS}
    with dask.config.set(given):
        assert batch.dask_tls_problem("tls://scheduler:8786") is None
    monkeypatch.setenv("DASK_DISTRIBUTED__COMM__TLS__CA_FILE", "/etc/rlhf-grading/ca.pem")
    dask.config.refresh()
    try:
        problem = batch.dask_tls_problem("tls://scheduler:8786")  # the variable as Dask spells it is read
        assert "has no DASK_DISTRIBUTED__COMM__TLS__CLIENT__CERT, DASK_DISTRIBUTED__COMM__TLS__CLIENT__KEY:" in problem
    finally:
        monkeypatch.delenv("DASK_DISTRIBUTED__COMM__TLS__CA_FILE")
        dask.config.refresh()


def test_a_scheduler_without_workers_is_said_not_waited_on_in_silence(capsys):
    from distributed import LocalCluster

    from rlhf_course.grading import batch

    with LocalCluster(n_workers=0, processes=False, dashboard_address=":0") as cluster:
        assert list(batch.grade_on_dask(None, [], cluster.scheduler_address, None)) == []
    said = capsys.readouterr().err
    assert f"no Dask worker has joined {cluster.scheduler_address}: grading waits until one does" in said
