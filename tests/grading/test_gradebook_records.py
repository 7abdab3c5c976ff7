"""What trusted grading writes into nbgrader's gradebook, without a sandbox (no root needed):
an unscored submission never keeps stale scores, and re-grading never wipes a person's work."""
from __future__ import annotations

import csv

import pytest

from rlhf_course import ASSIGNMENT, NOTEBOOK
from rlhf_course.grading.canonical import canonical_copy
from rlhf_course.grading import app, batch, examples, instructor, intake, release, results, trusted
from rlhf_course.grading.pages import feedback
from rlhf_course.grading.gradebook import gradebook
from rlhf_course.course import settings
from rlhf_course.grading.assignment import resolve
from rlhf_course.grading.results import GRADER_ERROR, CellResult, SubmissionResult
from rlhf_course.course.settings import Course, NotReady
from tests.support.course import cell_points, gradebook_url
from tests.support.submissions import canonical_json

pytestmark = pytest.mark.slow  # one nbgrader generate_assignment


@pytest.fixture(scope="module")
def course(tmp_path_factory):
    from tests.support.course import copy_course, release_course
    root = copy_course(tmp_path_factory.mktemp("records") / "course")
    release_course(root)
    root_course = Course.at(root)
    examples.write_submission(root_course, "ada", examples.answers_for(root_course, ()))
    return root


def _full_marks(checks, student="ada") -> SubmissionResult:
    points = cell_points(ASSIGNMENT)
    cells = {c.id: CellResult(c.id, points[c.id], points[c.id], c.message) for c in checks.values()}
    return SubmissionResult(student, results.GRADED, ASSIGNMENT, NOTEBOOK, cells=cells)


def _record(course, result):
    from nbgrader.api import Gradebook
    with Gradebook(gradebook_url(course)) as gb:
        gradebook.record_in_gradebook(gb, result)


def test_a_grader_error_after_full_marks_writes_zeros_that_need_a_person(course, monkeypatch):
    checks = instructor.checks_of(Course.at(course), ASSIGNMENT)
    _record(course, _full_marks(checks))
    assert sum(c.score for c in examples.cell_scores(gradebook_url(course), "ada").values()) == 44

    def broken(*args, **kwargs):
        raise RuntimeError("a judge blew up")
    monkeypatch.setattr(trusted, "_grade", broken)
    graded = Course.at(course)
    result = trusted.grade_submission(graded, resolve(graded, ASSIGNMENT), "ada", NOTEBOOK)
    assert result.state == GRADER_ERROR and set(result.cells) == set(checks) and result.score == 0
    _record(course, result)
    scores = examples.cell_scores(gradebook_url(course), "ada")
    assert sum(c.score for c in scores.values()) == 0  # never the stale 44
    from nbgrader.api import Gradebook
    with Gradebook(gradebook_url(course)) as gb:
        nb = gb.find_submission_notebook("rlhf_building_blocks", ASSIGNMENT, "ada")
        assert nb.needs_manual_grade and nb.flagged
        assert any("grader error" in (c.auto_comment or "") for c in nb.comments)


def test_regrading_keeps_a_manual_score(course):
    from nbgrader.api import Gradebook
    checks = instructor.checks_of(Course.at(course), ASSIGNMENT)
    _record(course, _full_marks(checks))
    with Gradebook(gradebook_url(course)) as gb:  # an instructor's override in the Formgrader
        grade = gb.find_grade("ppo_gradient", "rlhf_building_blocks", ASSIGNMENT, "ada")
        grade.manual_score = 0.5
        gb.db.commit()
    _record(course, _full_marks(checks))  # a late submission made them grade again
    with Gradebook(gradebook_url(course)) as gb:
        grade = gb.find_grade("ppo_gradient", "rlhf_building_blocks", ASSIGNMENT, "ada")
        assert grade.manual_score == 0.5 and grade.score == 0.5
        from nbgrader.plugins import CsvExportPlugin
        CsvExportPlugin(to=str(course / "grades.csv")).export(gb)
    with open(course / "grades.csv") as handle:
        row = next(r for r in csv.DictReader(handle) if r["student_id"] == "ada" and r["assignment"] == ASSIGNMENT)
    assert float(row["raw_score"]) == 44 - cell_points(ASSIGNMENT)["ppo_gradient"] + 0.5


def test_a_review_flag_lands_on_the_cell_it_concerns_only(course):
    from nbgrader.api import Gradebook
    checks = instructor.checks_of(Course.at(course), ASSIGNMENT)
    result = _full_marks(checks)
    result.flags = ["ppo_answer: imports os", "extra cell 61: uses get_ipython"]
    _record(course, result)
    with Gradebook(gradebook_url(course)) as gb:
        nb = gb.find_submission_notebook("rlhf_building_blocks", ASSIGNMENT, "ada")
        comments = {c.name: c.auto_comment or "" for c in nb.comments}
    assert "imports os" in comments["ppo_answer"] and "imports os" not in comments["dpo_answer"]
    assert all("extra cell 61" in text for text in comments.values())  # about the whole submission
    assert nb.flagged


def test_every_test_cell_shows_its_verdict_in_the_autograded_copy(course):
    import nbformat

    from rlhf_course.course import notebooks
    checks = instructor.checks_of(Course.at(course), ASSIGNMENT)
    result = _full_marks(checks)
    result.cells["dpo_gradient"].score = 0.0
    result.cells["dpo_gradient"].message = "the gradient flows. What went wrong: no gradient reached log_p_w"
    result.canonical_notebook = result.executed_notebook = canonical_json(course, "ada", ASSIGNMENT, NOTEBOOK)
    feedback.write_feedback(Course.at(course), result)
    graded = nbformat.read(str(course / "autograded" / "ada" / ASSIGNMENT / "rlhf_building_blocks.ipynb"), 4)
    cell = notebooks.cells_by_grade_id(graded)["dpo_gradient"]
    assert "FAILED" in cell.outputs[-1].text and "no gradient reached log_p_w" in cell.outputs[-1].text
    assert "passed" in notebooks.cells_by_grade_id(graded)["ppo_gradient"].outputs[-1].text
    for name in ("timestamp.txt", "submission_secret.txt"):  # what nbgrader's release_feedback reads
        assert (course / "feedback" / "ada" / ASSIGNMENT / name).is_file()


def test_stock_autograde_refuses_unless_allowed_and_changes_no_score(course, monkeypatch):
    """The Formgrader's Autograde button and `nbgrader autograde` run student code next to the hidden
    tests: the course refuses them with a message naming the trusted command."""
    checks = instructor.checks_of(Course.at(course), ASSIGNMENT)
    result = _full_marks(checks)
    result.cells["dpo_values"].score = 0.0
    _record(course, result)
    before = {g: c.score for g, c in examples.cell_scores(gradebook_url(course), "ada").items()}
    monkeypatch.delenv("RLHF_ALLOW_STOCK_AUTOGRADE", raising=False)
    proc = release.nbgrader(course, "autograde", ASSIGNMENT, "--force", check=False)
    assert proc.returncode != 0
    assert "Stock autograde is disabled" in proc.stdout + proc.stderr and "make grade" in proc.stdout + proc.stderr
    after = {g: c.score for g, c in examples.cell_scores(gradebook_url(course), "ada").items()}
    assert after == before


def _files_under(folder):
    return {path.relative_to(folder): path.read_bytes() for path in sorted(folder.rglob("*")) if path.is_file()}


@pytest.mark.parametrize("how", ["--force", "a newer submission"])
def test_a_refused_stock_autograde_keeps_the_trusted_copy(course, monkeypatch, how):
    """nbgrader clears autograded/<student>/<assignment> before it converts (with --force, as the Formgrader's
    Autograde button runs it, or when the submission is newer): the refusal comes first, so `make grade`'s copy
    and grading record stay, and the Formgrader, the feedback release and the class report keep them."""
    import os
    import shutil
    submitted = course / "submitted" / "ada" / ASSIGNMENT
    kept = course / "autograded" / "ada" / ASSIGNMENT
    kept.mkdir(parents=True, exist_ok=True)
    for name in ("rlhf_building_blocks.ipynb", "timestamp.txt"):
        shutil.copy2(submitted / name, kept / name)
    (kept / ".rlhf_building_blocks.feedback.json").write_text('{"as make grade wrote it": true}')
    if how == "a newer submission":  # nbgrader replaces a copy older than its submission, without --force
        os.utime(kept / "timestamp.txt", (0, 0))
        (kept / "timestamp.txt").write_text("2000-01-01 00:00:00.000000 UTC")
    before = _files_under(kept)
    monkeypatch.delenv("RLHF_ALLOW_STOCK_AUTOGRADE", raising=False)
    proc = release.nbgrader(course, "autograde", ASSIGNMENT, "--student=ada",
                            *(["--force"] if how == "--force" else []), check=False)
    assert proc.returncode != 0
    assert "Stock autograde is disabled" in proc.stdout + proc.stderr
    assert _files_under(kept) == before


WRITTEN = ("lab_question_1", "lab_question_2", "lab_question_3")


def _answer_in_writing(course, student, texts):
    """A correct submission with written answers typed into Part 4's answer cells."""
    import nbformat
    course_handle = Course.at(course)
    examples.write_submission(course_handle, student, examples.answers_for(course_handle, ()))

    from rlhf_course.course import notebooks
    path = course / "submitted" / student / ASSIGNMENT / "rlhf_building_blocks.ipynb"
    nb = nbformat.read(str(path), 4)
    for gid, text in texts.items():
        notebooks.cells_by_grade_id(nb)[gid].source = text
    nbformat.write(nb, str(path))
    return nb


def test_written_answers_need_a_person_and_keep_the_students_text(course):
    """Part 4's answers are nbgrader's manually graded answer cells (2 points each): restoring from the
    release keeps the student's text, an answer left as released scores 0, any other waits for a person."""
    from rlhf_course.course import notebooks
    release = notebooks.read(course / "release" / ASSIGNMENT / "rlhf_building_blocks.ipynb")
    assert all(notebooks.is_written_answer(notebooks.cells_by_grade_id(release)[g]) for g in WRITTEN)
    text = "The repeat penalty: the reward model never saw a repeated word."
    nb = _answer_in_writing(course, "bea", {"lab_question_1": text})
    shown, flags = canonical_copy(nb, release)
    assert flags == []
    assert notebooks.cells_by_grade_id(shown)["lab_question_1"].source == text  # not the release's stub
    assert intake.written_answers(shown, release) == {"lab_question_1": True, "lab_question_2": False,
                                                       "lab_question_3": False}
    nb.cells[[notebooks.grade_id(c) for c in nb.cells].index("lab_question_2")].metadata["nbgrader"]["points"] = 20
    shown, flags = canonical_copy(nb, release)
    assert "lab_question_2: nbgrader metadata points was edited" in flags[0]
    assert notebooks.cells_by_grade_id(shown)["lab_question_2"].metadata["nbgrader"]["points"] == 2

    checks = instructor.checks_of(Course.at(course), ASSIGNMENT)
    result = _full_marks(checks, "bea")
    result.written = {gid: {"answered": answered} for gid, answered in intake.written_answers(nb, release).items()}
    _record(course, result)
    from nbgrader.api import Gradebook
    with Gradebook(gradebook_url(course)) as gb:
        answered = gb.find_grade("lab_question_1", "rlhf_building_blocks", ASSIGNMENT, "bea")
        blank = gb.find_grade("lab_question_2", "rlhf_building_blocks", ASSIGNMENT, "bea")
        assert answered.auto_score is None and answered.needs_manual_grade and answered.max_score == 2
        assert blank.auto_score == 0 and not blank.needs_manual_grade
        assert gb.find_assignment(ASSIGNMENT).max_score == 44 + 3 * 2


def test_a_manual_score_on_a_written_answer_is_exported_shown_and_survives_regrading(course):
    """An instructor grades a written answer through nbgrader's API (what the Formgrader calls): the score
    and comment reach `nbgrader export` and the feedback page, and grading again keeps them."""
    from nbgrader.api import Gradebook

    from rlhf_course.course import notebooks
    release = notebooks.read(course / "release" / ASSIGNMENT / "rlhf_building_blocks.ipynb")
    text = "It gave up variety: a few positive words, over and over."
    nb = _answer_in_writing(course, "cy", {"lab_question_2": text})
    checks = instructor.checks_of(Course.at(course), ASSIGNMENT)

    def grade_again():
        result = _full_marks(checks, "cy")
        result.written = {g: {"answered": a} for g, a in intake.written_answers(nb, release).items()}
        result.canonical_notebook = result.executed_notebook = canonical_json(course, "cy", ASSIGNMENT, NOTEBOOK)
        _record(course, result)
        return feedback.write_feedback(Course.at(course), result)

    grade_again()
    with Gradebook(gradebook_url(course)) as gb:
        grade = gb.find_grade("lab_question_2", "rlhf_building_blocks", ASSIGNMENT, "cy")
        grade.manual_score = 1.5
        comment = gb.find_comment("lab_question_2", "rlhf_building_blocks", ASSIGNMENT, "cy")
        comment.manual_comment = "Right; say why entropy measures it."
        gb.db.commit()
    page = grade_again().read_text()  # a late submission made them grade again
    with Gradebook(gradebook_url(course)) as gb:
        grade = gb.find_grade("lab_question_2", "rlhf_building_blocks", ASSIGNMENT, "cy")
        assert grade.manual_score == 1.5 and grade.score == 1.5
        assert gb.find_comment("lab_question_2", "rlhf_building_blocks", ASSIGNMENT, "cy").manual_comment
    course_handle = Course.at(course)
    exported = examples.export_grades(course_handle, course / "export.csv")
    with open(exported) as handle:
        row = next(r for r in csv.DictReader(handle) if r["student_id"] == "cy" and r["assignment"] == ASSIGNMENT)
    assert float(row["raw_score"]) == 44 + 1.5 and float(row["max_score"]) == 50
    assert "lab_question_2" in page and "1.5 / 2" in page and "Right; say why entropy measures it." in page
    assert f"{ASSIGNMENT}: 45.5 / 50" in page and "Tests: 44 / 44" in page
    assert "It gave up variety" in page  # the student's text, as it ran
    graded = (course / "autograded" / "cy" / ASSIGNMENT / "rlhf_building_blocks.ipynb").read_text()
    assert "It gave up variety" in graded


def test_grading_without_a_recorded_assignment_says_what_to_run_and_writes_nothing(tmp_path, capsys, repo):
    """A fresh clone: release/ committed, no gradebook yet."""
    import shutil

    from tests.support.course import copy_course
    root = copy_course(tmp_path / "fresh")
    shutil.copytree(repo / "release", root / "release")
    root_course = Course.at(root)
    examples.write_submission(root_course, "ada", examples.answers_for(root_course, ()))
    with pytest.raises(NotReady, match=r"has no assignment 'rlhf': record it first with `make release`"):
        batch.complete_gradebook(root_course.with_config(
            CourseDirectory={"db_url": f"sqlite:///{tmp_path / 'empty.db'}"}), [ASSIGNMENT])
    before = sorted(str(p.relative_to(root)) for p in root.rglob("*"))
    assert app.main(["grade", f"--course-root={root}"]) == 2  # as `make grade` would, root or not
    said = capsys.readouterr().err
    assert said.startswith("grade did not run: ") and ("make release" in said or "cannot sandbox" in said)
    after = sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.name != "gradebook.db")
    assert after == before  # no release/ generated, no feedback, no report


def test_printed_gradebook_urls_hide_the_password():
    assert settings.shown_url("postgresql+psycopg2://grader:s3cret@db-host/rlhf") == \
        "postgresql+psycopg2://grader:***@db-host/rlhf"
    assert settings.shown_url("sqlite:////srv/course/gradebook.db") == "sqlite:////srv/course/gradebook.db"


def test_late_penalty_uses_nbgraders_lateness_so_an_extension_counts(course):
    """PenaltyPerHour (2 points per started hour) on nbgrader's total_seconds_late: 90 minutes late
    costs 4 points; with a 3-hour extension granted in the gradebook, nothing."""
    import datetime as dt

    from nbgrader.api import Gradebook
    checks = instructor.checks_of(Course.at(course), ASSIGNMENT)
    url = gradebook_url(course)
    with Gradebook(url) as gb:
        due = gb.find_assignment(ASSIGNMENT).duedate
    late = due + dt.timedelta(minutes=90)
    policy = Course.at(course).late_policy()

    def penalty():
        with Gradebook(url) as gb:
            gradebook.record_in_gradebook(gb, _full_marks(checks, "lena"), timestamp=late, policy=policy)
            return gb.find_submission_notebook("rlhf_building_blocks", ASSIGNMENT, "lena").late_submission_penalty

    assert penalty() == 4.0
    with Gradebook(url) as gb:
        gb.find_submission(ASSIGNMENT, "lena").extension = dt.timedelta(hours=3)
        gb.db.commit()
    assert penalty() is None  # on time: no penalty recorded, as nbgrader does


@pytest.mark.parametrize("assignment", ["rlhf", "rlhf_zh", "grpo", "grpo_zh"])
def test_each_written_answers_stub_names_its_question_and_counts_as_unanswered(assignment):
    """Validate lists unanswered cells by their text: each stub names its question (editions.question_stub), in
    the edition's language; the grader's "answered" compares with the release's own stub, so a stub left as
    released is unanswered and any other text is answered."""
    import copy

    from rlhf_course.grading import editions
    from rlhf_course.course import notebooks
    from tests.support.course import REPO
    path = next((REPO / "release" / assignment).glob("*.ipynb"))
    release = notebooks.read(path)
    written = {g: c for g, c in notebooks.cells_by_grade_id(release).items() if notebooks.is_written_answer(c)}
    assert len(written) >= 2 and len({c.source for c in written.values()}) == len(written)
    for question, cell in written.items():
        chinese = assignment.endswith("_zh")
        assert cell.source == (editions.question_stub(editions.ANSWER_STUBS["zh-CN"]["text"], question) if chinese
                               else f"YOUR ANSWER HERE ({question})")
    assert intake.written_answers(release, release) == {g: False for g in written}
    first = next(iter(written))
    answered = copy.deepcopy(release)
    notebooks.cells_by_grade_id(answered)[first].source = "My answer."
    assert intake.written_answers(answered, release) == {g: g == first for g in written}


def test_a_gradebook_url_that_sudo_dropped_is_named_before_make_release_is(tmp_path, monkeypatch, repo):
    """`sudo make grade` without --preserve-env: RLHF_GRADEBOOK_URL (the course's PostgreSQL) is gone, the default
    sqlite gradebook has no assignment.  `sudo make release`, which the message would name alone, would record the
    assignment there and split the grades between two gradebooks: the message names the dropped variable first."""
    import shutil

    from tests.support.course import copy_course
    root = copy_course(tmp_path / "course")
    shutil.copytree(repo / "release", root / "release")
    course = Course.at(root).with_config(CourseDirectory={"db_url": f"sqlite:///{tmp_path / 'empty.db'}"})
    monkeypatch.delenv("RLHF_GRADEBOOK_URL", raising=False)
    monkeypatch.setenv("SUDO_USER", "instructor")
    with pytest.raises(NotReady) as refused:
        batch.complete_gradebook(course, [ASSIGNMENT])
    said = str(refused.value)
    assert "sudo dropped that variable: run `sudo --preserve-env=RLHF_GRADEBOOK_URL make grade`" in said
    assert said.index("--preserve-env") < said.index("`make release`")
    monkeypatch.delenv("SUDO_USER")  # not under sudo: the variable was never dropped
    with pytest.raises(NotReady) as refused:
        batch.complete_gradebook(course, [ASSIGNMENT])
    assert "--preserve-env" not in str(refused.value) and "record it first with `make release`" in str(refused.value)
