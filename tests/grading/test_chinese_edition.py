"""The Chinese edition (rlhf_zh) is graded exactly as the English one: the same correct, wrong and
tampered submissions handed in to both get the same state and the same score in every cell, by the
trusted grader (in-process double; the real sandbox runs the same code) and by stock nbgrader
autograde; the students read their messages and feedback in Chinese; the export lists each once."""
import csv

import pytest

import rlhf_catalogue
import rlhf_hidden_checks
from rlhf_course import NOTEBOOK
from rlhf_course.grading import batch, editions, examples
from rlhf_course.course.settings import Course
from tests.support.course import cell_points, copy_course, gradebook_url, needs_sandbox, release_course

from tests.support.english import english_phrases
from tests.support.in_process_sandbox import grade_in_process

pytestmark = pytest.mark.slow  # stock autograde of both editions, the real sandbox

EN, ZH = "rlhf", "rlhf_zh"
POINTS = cell_points("rlhf")  # what each grade cell is worth (the notebook's nbgrader.points)
TAMPERED = [a for a in rlhf_catalogue.ADVERSARIAL if a.tamper and not a.answers]
# Every catalogued mistake, at most one of each function a submission (a grade cell tests one function: each cell's
# score is its function's mistake's, and the editions are compared cell by cell), 10 submissions, not 23
STUDENTS = {"correct": (), **rlhf_catalogue.wrong_answer_classes()}
GUIDE_BUG = rlhf_catalogue.class_of_mistake()["ppo_clip_without_min"]  # holds the guide's PPO slip, among others


def hand_in(course, assignment):
    course_handle = Course.at(course)
    for student, wrong in STUDENTS.items():
        examples.write_submission(course_handle, student, examples.answers_for(course_handle, wrong), assignment=assignment)
    for attack in TAMPERED:
        folder = examples.write_submission(course_handle, attack.name, examples.answers_for(course_handle, ()), assignment=assignment)
        rlhf_catalogue.tamper_notebook(folder / NOTEBOOK, attack.tamper)
    examples.write_submission(course_handle, "empty", examples.answers_for(course_handle, None), assignment=assignment)


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    course = release_course(copy_course(tmp_path_factory.mktemp("zh") / "course"))
    hand_in(course, EN)
    hand_in(course, ZH)  # later: the Chinese submissions are each student's latest
    course_handle = Course.at(course)
    results = grade_in_process(course_handle, assignments=[EN, ZH])
    return course, {(r.assignment, r.student): r for r in results}


def scores(result):
    return {c.grade_id: c.score for c in result.cells.values()}


def test_every_submission_gets_the_same_state_and_cell_scores_in_both_editions(graded):
    _, results = graded
    students = {s for (_, s) in results}
    assert len(students) == len(STUDENTS) + len(TAMPERED) + 1
    for student in students:
        en, zh = results[(EN, student)], results[(ZH, student)]
        assert (zh.state, scores(zh), zh.max_score) == (en.state, scores(en), en.max_score), student
        assert bool(zh.flags) == bool(en.flags), student
    assert results[(ZH, "correct")].score == sum(POINTS[gid] for gid in rlhf_hidden_checks.CHECKS)


def test_the_chinese_student_reads_the_checks_messages_in_chinese(graded):
    _, results = graded
    messages = editions.edition_of(Course.at(graded[0]), ZH).table()["messages"]
    wrong = results[(ZH, GUIDE_BUG)]
    failed = [c for c in wrong.cells.values() if c.score < c.points]
    assert failed
    for cell in failed:
        assert cell.message.startswith(messages[cell.grade_id]["text"] + "。问题所在："), cell.message
    english = results[(EN, GUIDE_BUG)].cells[failed[0].grade_id].message
    assert ". What went wrong: " in english
    # the checks' own sentences too (numbers, and the test cases' notes, as they are), and an unreadable
    # notebook's state
    details = " ".join(c.message for c in failed)
    assert "目标值为" in details and "objective " not in details and "What went wrong" not in details, details
    unreadable = next(r for (a, s), r in results.items() if a == ZH and r.state not in ("graded", "failed tests"))
    assert all(c.message.startswith("未评分：") for c in unreadable.cells.values()), unreadable.cells


def test_no_failure_of_any_wrong_answer_reads_in_english(graded):
    """Every cell every wrong answer of the catalogue fails, in the Chinese edition: the message, the
    judge's detail and the case's note are Chinese; English is left only inside a Python error's own
    text (after "...Error: ") and in code and numbers (ratio=0.5, float32, log_p_w)."""
    _, results = graded
    failures = [(student, cell.grade_id, cell.message) for (assignment, student), result in results.items()
                if assignment == ZH and student in STUDENTS for cell in result.cells.values() if cell.score < cell.points]
    assert len(failures) > 60
    english = [(student, grade_id, message) for student, grade_id, message in failures
               if english_phrases(message)]
    assert english == [], "\n".join(map(str, english))


def test_the_chinese_feedback_page_is_in_chinese_and_hides_the_tests(graded):
    course, results = graded
    page = (course / "feedback" / GUIDE_BUG / ZH / "rlhf_building_blocks.html").read_text()
    assert "测试得分" in page and "| 测试 | 分数 | 结果 | 检查的性质 |" not in page  # rendered as a table
    assert "<th>测试</th>" in page or ">测试<" in page
    assert "run_check" not in page and "rlhf_hidden_checks" not in page
    assert "可信评分" in page  # the verdict under each test cell


RESTORED_BY_ATTACK = {"tampered_visible_test": ("ppo_visible_tests", "edited"),
                      "deleted_hidden_test_cell": ("gae_random_lengths", "deleted"),
                      "raised_points_in_metadata": ("dpo_values", "metadata edited")}


@pytest.mark.parametrize("assignment, language", [(EN, "en"), (ZH, "zh-CN")])
def test_the_page_says_above_each_cell_put_back_that_the_release_was_graded(graded, assignment, language):
    """An edited visible test, a deleted hidden test cell, raised points: graded by the in-process grader, each
    page says so above that cell, in the edition's language, and nowhere else."""
    from bs4 import BeautifulSoup

    from rlhf_course.course import notebooks
    from rlhf_course.grading.pages.feedback import RESTORED_NOTES
    from rlhf_course.i18n import t
    course, results = graded
    release_cells = notebooks.cells_by_grade_id(notebooks.read(course / "release" / assignment / NOTEBOOK))
    for attack, (gid, why) in RESTORED_BY_ATTACK.items():
        page = (course / "feedback" / attack / assignment / NOTEBOOK.replace(".ipynb", ".html")).read_text()
        notes = BeautifulSoup(page, features="html.parser").select("div.rlhf-restored")
        assert [note.get_text(strip=True) for note in notes] == [t(RESTORED_NOTES[why], language)], attack
        first_line = release_cells[gid].source.split("\n")[0].strip()
        assert first_line in notes[0].find_next_sibling(class_="jp-Cell").get_text(), attack  # the cell put back
    correct = (course / "feedback" / "correct" / assignment / NOTEBOOK.replace(".ipynb", ".html")).read_text()
    assert not BeautifulSoup(correct, features="html.parser").select("div.rlhf-restored")


@pytest.mark.parametrize("how", ["make grade", "nbgrader export"])
def test_the_export_lists_each_student_once_with_their_latest_edition(graded, how):
    course, results = graded
    course_handle = Course.at(course)
    exported = course / "grades.csv" if how == "make grade" else examples.export_grades(course_handle, course / "export.csv")
    with open(exported) as handle:
        rows = list(csv.DictReader(handle))
    assert ZH not in {row["assignment"] for row in rows}  # folded into rlhf
    rows = [row for row in rows if row["assignment"] == EN]
    students = {s for (_, s) in results}
    assert sorted(row["student_id"] for row in rows) == sorted(students)
    assert {row["edition"] for row in rows} == {ZH}
    assert {row["student_id"]: float(row["raw_score"]) for row in rows} == {
        s: results[(ZH, s)].score for s in students}


def test_stock_autograde_scores_the_chinese_edition_like_the_english_one(tmp_path):
    """Stock autograde of the Chinese edition: every cell scored as the catalogue says, which is how it scores the
    English edition (tests/grading/test_roundtrip.py: the reference, and a mistake of each function).  One notebook
    (a kernel each): a mistake of one function, its cells lost as catalogued, the other functions' correct answers
    scored in full (the lost cells pass with correct answers in the English edition's stock autograde, the same cells
    but the language line; each cell of both editions is compared by the trusted grader above)."""
    course = release_course(copy_course(tmp_path / "course"))
    chosen = {"one_mistake": ("ppo_clip_without_min",)}
    course_handle = Course.at(course)
    for student, wrong in chosen.items():
        examples.write_submission(course_handle, student, examples.answers_for(course_handle, wrong), assignment=ZH)
    examples.autograde(course_handle, assignment=ZH)
    url = gradebook_url(course)
    for student in chosen:
        zh = {g: s.score for g, s in examples.cell_scores(url, student, ZH).items() if g in rlhf_hidden_checks.CHECKS}
        assert set(zh) == set(rlhf_hidden_checks.CHECKS), student
        lost = {g for g, score in zh.items() if score < POINTS[g]}
        assert lost == rlhf_catalogue.cells_lost_by(chosen[student]), student
        assert all(zh[g] == 0 for g in lost), student
    assert lost and set(zh) - lost  # some cells lost, the others scored in full
    autograded = (course / "autograded" / "one_mistake" / ZH / NOTEBOOK).read_text()
    assert "问题所在" in autograded  # the in-kernel hidden test failed with the Chinese message


@needs_sandbox
def test_the_real_sandbox_grades_the_chinese_edition_and_runs_its_language_line(tmp_path):
    """The edition's set-up cell (i18n.set_language) runs inside bubblewrap; the feedback copy shows it ran."""
    course = release_course(copy_course(tmp_path / "course"))
    course_handle = Course.at(course)
    for student, wrong in (("correct", ()), ("ppo_clip_without_min", ("ppo_clip_without_min",))):
        examples.write_submission(course_handle, student, examples.answers_for(course_handle, wrong), assignment=ZH)
    results = {r.student: r for r in batch.grade_all(course_handle, workers=1, show_progress=False, assignments=[ZH])}
    total = sum(POINTS[gid] for gid in rlhf_hidden_checks.CHECKS)
    assert (results["correct"].state, results["correct"].score) == ("graded", total), results["correct"].detail
    wrong = results["ppo_clip_without_min"]
    assert wrong.state == "failed tests"
    lost = {c.grade_id for c in wrong.cells.values() if c.score < c.points}
    assert lost == set(rlhf_catalogue.WRONG_BY_NAME["ppo_clip_without_min"].loses)
    page = (course / "feedback" / "ppo_clip_without_min" / ZH / "rlhf_building_blocks.html").read_text()
    assert "测试得分" in page and "（nbgrader 运行本笔记本时跳过交互图）" in page  # the explorers spoke Chinese
