"""Trusted batch grading against a class of correct, wrong, adversarial and broken submissions:
each gets exactly the score and state it deserves, and nothing outside a submission changes.

Every adversarial submission whose code attacks goes through the real sandbox here; of the honest catalogue a
representative few (one correct-variant submission, one holding a mistake of each function, the guide's PPO slip
among them): every correct variant and mistake, and every notebook tampered with but answered honestly, is judged
through the same pipeline in-process (tests/grading/test_pipeline_in_process.py; the sandbox runs the same code,
tests/support/in_process_sandbox.py).
The whole catalogue through the real sandbox: ``python bench/catalogue.py`` (this file with
RLHF_WHOLE_CATALOGUE=1).
"""
import os
import socket
import threading
from pathlib import Path

import pytest

import rlhf_catalogue
import rlhf_hidden_checks
from rlhf_course import ASSIGNMENT, NOTEBOOK
from rlhf_course.grading import batch, examples, release
from rlhf_course.course.limits import Limits
from rlhf_course.grading.results import GRADED
from rlhf_course.course.settings import Course
from tests.support.submissions import tree_digest
from tests.support.course import cell_points, copy_course, gradebook_url, leftover_sandbox_processes, release_course

from tests.support.course import needs_sandbox
from tests.support.in_process_sandbox import grade_in_process

pytestmark = [pytest.mark.slow, needs_sandbox]

CORRECT = ("ada_correct", "zoe_correct")
CORRECT_CLASSES = rlhf_catalogue.correct_variant_classes()  # every correct style, a few per submission
MISTAKE_CLASSES = rlhf_catalogue.wrong_answer_classes()  # every mistake, at most one per function
GUIDE_BUG = rlhf_catalogue.class_of_mistake()["ppo_clip_without_min"]  # the feedback page's example
ADVERSARIAL = rlhf_catalogue.ADVERSARIAL
if not os.environ.get("RLHF_WHOLE_CATALOGUE"):  # a representative few
    CORRECT_CLASSES = dict(sorted(CORRECT_CLASSES.items())[:1])
    MISTAKE_CLASSES = {GUIDE_BUG: MISTAKE_CLASSES[GUIDE_BUG]}
    # A notebook file tampered with, its answers the reference's, is judged before any sandbox runs (intake puts
    # the release's cells and points back): each is graded through the same pipeline in-process, its state, score
    # and flag checked (test_pipeline_in_process.py).  Here the one that never reaches a sandbox.
    ADVERSARIAL = [attack for attack in ADVERSARIAL if attack.answers or attack.tamper == "invalid_json"]
MISTAKES = [rlhf_catalogue.WRONG_BY_NAME[name] for names in MISTAKE_CLASSES.values() for name in names]
AUTOGRADED = set(rlhf_hidden_checks.CHECKS)  # the test cells; manually graded cells are a person's
AUTOGRADED_TOTAL = sum(cell_points(ASSIGNMENT)[gid] for gid in rlhf_hidden_checks.CHECKS)
# Small on purpose: the looping submissions wait out the feedback limit, then one call's.  3 s is 6x the slowest
# feedback run of the others measured with this class (0.5 s, the fork bomb; honest ones about 0.1 s), 2 s some
# hundred times an honest call.
LIMITS = Limits(call_seconds=2.0, feedback_seconds=3.0)


def _owner_of_peer(port: int, peer_port: int) -> int | None:
    """The uid owning the loopback socket connected from ``peer_port`` to ``port`` (None: gone, or not found)."""
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            local, remote = int(fields[1].rsplit(":", 1)[1], 16), int(fields[2].rsplit(":", 1)[1], 16)
            if local == peer_port and remote == port and fields[9] != "0":  # a live socket, not an orphan
                return int(fields[7])
    return None


class Listener:
    """A loopback server that records any connection a submission manages to make.  A connection from a process
    known not to be a sandbox's (another test on this machine probing every loopback port: the hub test's student
    does) is kept apart; one from a sandbox's uid, or whose owner is gone, counts."""

    def __init__(self, port: int = 47123):
        self.port, self.connections, self.others = port, 0, []
        self.server = socket.socket()
        self.server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.server.bind(("127.0.0.1", port))
        self.server.listen()
        self.server.settimeout(0.5)
        self.running = True
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self):
        from rlhf_course.grading.sandbox.sandbox import FIRST_UID, SLOT_COUNT
        while self.running:
            try:
                conn, (_, peer_port) = self.server.accept()
            except OSError:
                continue
            try:
                owner = _owner_of_peer(self.port, peer_port)
                if owner is None or FIRST_UID <= owner < FIRST_UID + SLOT_COUNT:
                    self.connections += 1
                else:
                    self.others.append(owner)
            finally:
                conn.close()

    def close(self):
        self.running = False
        self.thread.join()
        self.server.close()


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    course = copy_course(tmp_path_factory.mktemp("batch") / "course")
    release_course(course)
    course_handle = Course.at(course)
    for student in CORRECT:
        examples.write_submission(course_handle, student, examples.answers_for(course_handle, ()))
    for student, variants in CORRECT_CLASSES.items():
        examples.write_submission(course_handle, student, {**examples.answers_for(course_handle, ()), **variants})
    _answer_in_writing(course, "ada_correct")  # zoe_correct leaves the written answers as released
    for student, mistakes in MISTAKE_CLASSES.items():
        examples.write_submission(course_handle, student, examples.answers_for(course_handle, mistakes))
    for attack in ADVERSARIAL:
        answers = {**examples.answers_for(course_handle, ()), **attack.answers}
        folder = examples.write_submission(course_handle, attack.name, answers)
        if attack.tamper:
            rlhf_catalogue.tamper_notebook(folder / NOTEBOOK, attack.tamper)
    before = tree_digest(course)
    listener = Listener()
    try:
        results = batch.grade_all(course_handle, workers=2, limits=LIMITS, show_progress=False)
    finally:
        listener.close()
    return course, {r.student: r for r in results}, before, listener


WRITTEN = ("lab_question_1", "lab_question_2", "lab_question_3")  # Part 4, graded by a person (2 points each)


def _answer_in_writing(course, student):
    import nbformat

    from rlhf_course.course import notebooks
    path = course / "submitted" / student / ASSIGNMENT / NOTEBOOK
    nb = nbformat.read(str(path), 4)
    for gid in WRITTEN:
        notebooks.cells_by_grade_id(nb)[gid].source = f"{student} writes about {gid}: <b>bold</b> claims."
    nbformat.write(nb, str(path))


def lost(result):
    return {c.grade_id for c in result.cells.values() if c.score < c.points and c.grade_id in AUTOGRADED}


def autograded_score(result):
    assert AUTOGRADED <= set(result.cells), AUTOGRADED - set(result.cells)
    return sum(c.score for c in result.cells.values() if c.grade_id in AUTOGRADED)


def test_correct_students_get_full_marks(graded):
    _, results, _, _ = graded
    for student in CORRECT:
        assert results[student].state == GRADED, results[student].detail
        assert autograded_score(results[student]) == AUTOGRADED_TOTAL, lost(results[student])


@pytest.mark.parametrize("student", sorted(CORRECT_CLASSES))
def test_every_correct_variant_gets_full_marks(graded, student):
    _, results, _, _ = graded
    result = results[student]
    assert result.state == GRADED, (result.state, result.detail, lost(result), sorted(CORRECT_CLASSES[student]))
    assert lost(result) == set() and autograded_score(result) == AUTOGRADED_TOTAL
    assert not result.flags, result.flags  # plain answers: nothing for a person to review


def test_the_representative_few_hold_a_mistake_of_every_function():
    assert {wrong.answer_cell for wrong in MISTAKES} == set(rlhf_catalogue.FUNCTION_OF_CELL)


@pytest.mark.parametrize("wrong", MISTAKES, ids=lambda w: w.name)
def test_trusted_scores_agree_with_the_catalogue(graded, wrong):
    """Its submission loses exactly its mistakes' cells; among its function's cells, this mistake's."""
    _, results, _, _ = graded
    student = rlhf_catalogue.class_of_mistake()[wrong.name]
    result = results[student]
    assert result.state == "failed tests", result.detail
    assert lost(result) == rlhf_catalogue.cells_lost_by(MISTAKE_CLASSES[student]), MISTAKE_CLASSES[student]
    function = rlhf_catalogue.FUNCTION_OF_CELL[wrong.answer_cell]
    assert {g for g in lost(result) if rlhf_hidden_checks.CHECKS[g].function == function} == set(wrong.loses)


@pytest.mark.parametrize("attack", ADVERSARIAL, ids=lambda a: a.name)
def test_each_attack_gets_the_state_and_score_it_deserves(graded, attack):
    _, results, _, _ = graded
    result = results[attack.name]
    assert result.state == attack.state, (result.state, result.detail)
    expected_lost = AUTOGRADED if attack.loses is None else set(attack.loses)
    assert lost(result) == expected_lost, result.detail
    assert bool(result.flags) == attack.flagged, result.flags


def test_nothing_outside_the_grader_outputs_changed(graded):
    course, _, before, _ = graded
    assert tree_digest(course) == before
    assert (course / "gradebook.db").stat().st_uid == os.geteuid()  # a student's symlink did not hand it over


def test_no_network_and_no_process_left_behind(graded):
    _, _, _, listener = graded
    assert listener.connections == 0, f"{listener.connections} connections (and from other uids: {listener.others})"
    assert leftover_sandbox_processes() == {}


def test_gradebook_holds_the_trusted_numbers_and_flags(graded):
    course, results, _, _ = graded
    from nbgrader.api import Gradebook
    db = gradebook_url(course)
    for student in ("ada_correct", GUIDE_BUG, "infinite_loop", "invalid_json"):
        cells = examples.cell_scores(db, student)
        assert set(cells) == set(results[student].cells) | set(WRITTEN)
        assert {g: cells[g].score for g in results[student].cells} == {g: c.score for g, c in results[student].cells.items()}
    with Gradebook(db) as gb:
        assert not gb.find_submission_notebook("rlhf_building_blocks", ASSIGNMENT, "ada_correct").flagged
        for student in ("infinite_loop", "invalid_json", "patches_comparisons"):
            assert gb.find_submission_notebook("rlhf_building_blocks", ASSIGNMENT, student).flagged
        assert gb.find_submission_notebook("rlhf_building_blocks", ASSIGNMENT, "infinite_loop").needs_manual_grade


def test_export_and_report_list_every_student(graded):
    course, results, _, _ = graded
    grades = (course / "grades.csv").read_text()
    report = (course / batch.REPORT).read_text()
    for student in results:
        assert student in grades and student in report
    assert "timed out" in report and "malformed notebook" in report


def test_feedback_names_tests_without_hidden_code(graded):
    course, results, _, _ = graded
    page = (course / "feedback" / GUIDE_BUG / ASSIGNMENT / "rlhf_building_blocks.html").read_text()
    assert "ppo_positive_advantage_keeps_downside" in page
    assert "clipping must not apply to r &lt; 1 - eps when A &gt; 0" in page
    assert "run_check" not in page and "rlhf_hidden_checks" not in page and "BEGIN HIDDEN" not in page
    assert "A = +1: objective = 1.0800" in page  # the student's own (wrong) output, as their notebook ran
    assert "AssertionError" in page and "\x1b[" not in page
    for student in results:
        assert (course / "feedback" / student / ASSIGNMENT / "rlhf_building_blocks.html").is_file()


def test_trusted_feedback_is_released_by_nbgrader(graded, tmp_path, monkeypatch):
    """Trusted grading leaves what `nbgrader release_feedback` reads: every page is released under
    the name the student's fetch_feedback looks for (a hash of their submission secret)."""
    from nbgrader.utils import notebook_hash
    course, results, _, _ = graded
    exchange = tmp_path / "exchange"
    exchange.mkdir(mode=0o755)
    monkeypatch.setenv("RLHF_EXCHANGE_ROOT", str(exchange))
    release.nbgrader(course, "release_feedback", ASSIGNMENT)
    released = {p.name for p in exchange.rglob("*.html")}
    assert len(released) == len(results)
    for student in results:
        secret = (course / "feedback" / student / ASSIGNMENT / "submission_secret.txt").read_text()
        assert f"{notebook_hash(secret=secret, notebook_id='rlhf_building_blocks')}.html" in released


def test_written_answers_wait_for_a_person_with_the_students_text(graded):
    course, results, _, _ = graded
    from nbgrader.api import Gradebook
    with Gradebook(gradebook_url(course)) as gb:
        for gid in WRITTEN:
            answered = gb.find_grade(gid, "rlhf_building_blocks", ASSIGNMENT, "ada_correct")
            blank = gb.find_grade(gid, "rlhf_building_blocks", ASSIGNMENT, "zoe_correct")
            assert answered.auto_score is None and answered.needs_manual_grade and answered.score == 0
            assert blank.auto_score == 0 and not blank.needs_manual_grade
    assert results["ada_correct"].written["lab_question_1"]["answered"] is True
    graded_copy = (course / "autograded" / "ada_correct" / ASSIGNMENT / NOTEBOOK).read_text()
    assert "ada_correct writes about lab_question_3" in graded_copy
    page = (course / "feedback" / "ada_correct" / ASSIGNMENT / "rlhf_building_blocks.html").read_text()
    assert f"{ASSIGNMENT}: 44 / 50" in page and "awaiting a person" in page
    assert "ada_correct writes about lab_question_1" in page


def test_regrading_keeps_a_manual_score_and_shows_it_in_export_and_feedback(graded):
    """Last in this file: it grades ada_correct again (in-process).  A person's score and comment on a written answer,
    set through nbgrader's API as the Formgrader does, survive `make grade` and reach grades.csv,
    `nbgrader export` and the feedback page."""
    import csv

    from nbgrader.api import Gradebook
    course, _, _, _ = graded
    with Gradebook(gradebook_url(course)) as gb:
        gb.find_grade("lab_question_3", "rlhf_building_blocks", ASSIGNMENT, "ada_correct").manual_score = 2.0
        gb.find_comment("lab_question_3", "rlhf_building_blocks", ASSIGNMENT, "ada_correct").manual_comment = \
            "Clear: the margin is all the loss asks for."
        gb.db.commit()
    # Graded again in-process (tests/support/in_process_sandbox.py): what is kept is the gradebook's and the
    # export's business, whatever ran the code; this file's batch went through the real sandbox.
    course_handle = Course.at(course)
    [again] = grade_in_process(course_handle, students=["ada_correct"], limits=LIMITS)
    assert again.state == GRADED and again.score == 44
    with Gradebook(gradebook_url(course)) as gb:
        grade = gb.find_grade("lab_question_3", "rlhf_building_blocks", ASSIGNMENT, "ada_correct")
        assert grade.manual_score == 2.0 and grade.score == 2.0
    for grades in (course / "grades.csv", examples.export_grades(course_handle, course / "export.csv")):
        with open(grades) as handle:
            row = next(r for r in csv.DictReader(handle) if r["student_id"] == "ada_correct" and r["assignment"] == ASSIGNMENT)
        assert float(row["raw_score"]) == 46 and float(row["max_score"]) == 50, grades
    page = (course / "feedback" / "ada_correct" / ASSIGNMENT / "rlhf_building_blocks.html").read_text()
    assert f"{ASSIGNMENT}: 46 / 50" in page and "2 / 2" in page and "Clear: the margin is all the loss asks for." in page
