"""The class report read before office hours: who needs help first (students by score, lowest first), who never
submitted (the roster is nbgrader's students table), each student a link into the Formgrader, flags that say how
much they matter, no flag from a class too small to tell, and a discrimination flag whose false-alarm rate does
not depend on the class size (measured here by simulation)."""
from __future__ import annotations

import random
import re
import statistics

import pytest

from rlhf_course import ASSIGNMENT
from rlhf_course.grading.pages import class_report
from rlhf_course.grading.pages.class_report import HiddenTest, StudentRow, hidden_test
from rlhf_course.course.settings import Course
from tests.support import synthetic_class
from tests.support.course import copy_course, gradebook_url, release_course

ABSENT = ("x_absent_1", "x_absent_2")


@pytest.fixture(scope="module")
def course(tmp_path_factory):
    """The synthetic class (56 students written into the gradebook, nobody graded for real) and two students of
    the roster who submitted nothing."""
    import rlhf_catalogue
    from nbgrader.api import Gradebook
    root = release_course(copy_course(tmp_path_factory.mktemp("office_hours") / "course"))
    plans = synthetic_class.build(root, rlhf_catalogue, real=False)
    with Gradebook(gradebook_url(root)) as gb:
        for student in ABSENT:
            gb.update_or_create_student(student)
    return root, plans


@pytest.fixture(scope="module")
def english(course):
    root, plans = course
    root_course = Course.at(root)
    report = class_report.write_reports(root_course, [ASSIGNMENT])[0]
    return report.html.read_text(), report


def _section(page: str, anchor: str) -> str:
    start = page.index(f'id="{anchor}"')
    return page[start:page.find("<h2", start + 1)]


def test_the_roster_says_who_never_submitted(course, english):
    root, plans = course
    page, written = english
    assert f"{len(plans)} of {len(plans) + 2} submitted; missing: x_absent_1, x_absent_2" in page
    rows = written.csv.read_text()
    assert f"roster,all,,students,{len(plans) + 2}" in rows and f"roster,all,,submitted,{len(plans)}" in rows
    assert "roster,all,,missing,x_absent_1; x_absent_2" in rows


def test_students_by_score_lowest_first_beside_the_id_order(course, english):
    root, plans = course
    page, _ = english
    by_score = _section(page, "by-score")
    order = re.findall(r'<td class="n">([0-9.]+) / ', by_score)
    assert len(order) == len(plans)
    assert [float(x) for x in order] == sorted(float(x) for x in order)  # lowest first
    by_id = re.findall(r'<tr><td><a href="[^"]*">([^<]*)</a>', _section(page, "students"))
    assert by_id == sorted(by_id) and len(by_id) == len(plans)


def test_each_student_is_a_link_to_their_formgrader_submission(course, english):
    from nbgrader.api import Gradebook
    root, plans = course
    page, _ = english
    with Gradebook(gradebook_url(root)) as gb:
        first = sorted(p.student for p in plans)[0]
        plan = next(p for p in plans if p.student == first)
        notebook_id = gb.find_submission(plan.edition, first).notebooks[0].id
    assert f'<a href="http://localhost:8888/formgrader/submissions/{notebook_id}/">{first}</a>' in page
    to_do = _section(page, "manual")
    assert to_do.count('<a href="http://localhost:8888/formgrader/submissions/') == \
        sum(1 for p in plans for v in p.written.values() if v is None)
    assert "&lt;img src=x onerror=alert(1)&gt;" in page and "<img src=x" not in page  # an id stays text


def test_the_formgrader_address_is_a_setting(course):
    root, _ = course
    hub = Course.at(root).with_config(ClassReportSettings={"formgrader_url": "https://hub.example/user/prof/formgrader"})
    page = class_report.write_reports(hub, [ASSIGNMENT])[0].html.read_text()
    assert '<a href="https://hub.example/user/prof/formgrader/submissions/' in page


def _test_row(page: str, grade_id: str) -> str:
    tests = _section(page, "tests")
    start = tests.index(f"<tr><td>{grade_id}</td>")
    return tests[start:tests.index("</tr>", start)]


def test_flags_have_severities(english):
    page, _ = english
    assert '<span class="flag red">nobody passes</span>' in _test_row(page, synthetic_class.BROKEN)
    assert '<span class="flag red">negative discrimination</span>' in _test_row(page, synthetic_class.UNCLEAR)
    assert '<span class="flag grey">everybody passes</span>' in _test_row(page, "gae_shape")


def test_too_few_submissions_are_not_flagged_and_the_page_says_so(tmp_path):
    import rlhf_catalogue
    root = release_course(copy_course(tmp_path / "course"))
    plans = synthetic_class.build(root, rlhf_catalogue, students=8, real=False)
    assert len(plans) < class_report.MIN_STUDENTS
    root_course = Course.at(root)
    for language, sentence in (("en", f"Too few submissions to flag: {len(plans)}, flags need "
                                      f"{class_report.MIN_STUDENTS}."),
                               ("zh-CN", f"提交太少，不作标记：{len(plans)} 份，至少需要 {class_report.MIN_STUDENTS} 份。")):
        written = class_report.write_reports(root_course, [ASSIGNMENT], language=language)[0]
        page = written.html.read_text()
        assert sentence in page
        assert 'class="flag red"' not in page and 'class="flag grey"' not in page
    assert ",test,all," in written.csv.read_text() and ",flags,nobody passes" not in written.csv.read_text()


def _row(student: str, passed: bool, rest: float) -> StudentRow:
    return StudentRow(student, ASSIGNMENT, None, None, None, rest + float(passed), 0.0, 10.0,
                      cells={"unrelated": (float(passed), 1.0)})


def _simulated_class(rng: random.Random, n: int) -> list[StudentRow]:
    """``n`` students whose ability drives the rest of their score (nine items) and not the one test, which each
    passes with probability 0.6 whatever their ability."""
    rows = []
    for i in range(n):
        ability = rng.gauss(0.0, 1.0)
        rest = sum(rng.random() < 1 / (1 + 2.718281828 ** -(ability - d)) for d in (-1.5, -1, -0.5, 0, 0, 0.5, 1, 1.5, 2))
        rows.append(_row(f"s{i}", rng.random() < 0.6, float(rest)))
    return rows


@pytest.mark.parametrize("n", [10, 30, 60])
def test_a_test_unrelated_to_ability_is_flagged_at_most_about_five_percent_of_the_time(n):
    rng = random.Random(20261207 + n)
    trials = 2000
    flagged = sum("negative discrimination" in hidden_test("unrelated", _simulated_class(rng, n)).flags
                  for _ in range(trials))
    rate = flagged / trials
    print(f"n = {n}: false flags {rate:.3f}")
    assert rate <= 0.05, f"n = {n}: {rate:.1%} of classes flag an unrelated test"


def test_discrimination_is_pearsons_r_and_the_threshold_is_two_standard_errors():
    rows = [_row(f"s{i}", passed, rest) for i, (passed, rest) in
            enumerate([(1, 9), (0, 8), (1, 3), (0, 7), (1, 2), (0, 9), (1, 4), (0, 8), (1, 1), (0, 6)])]
    test: HiddenTest = hidden_test("unrelated", rows)
    expected = statistics.correlation([float(p) for p, _ in [(r.cells["unrelated"][0], 0) for r in rows]],
                                      [r.raw_score - r.cells["unrelated"][0] for r in rows])
    assert test.discrimination == pytest.approx(expected) and expected < -2 / 10 ** 0.5
    assert test.flags == ["negative discrimination"]
    assert class_report.negative_discrimination_threshold(10) == pytest.approx(-2 / 10 ** 0.5)


@pytest.mark.parametrize("language, late_by", [("en", "2 min"), ("zh-CN", "2 分钟")])
def test_a_submission_minutes_late_says_how_late_beside_its_penalty(language, late_by):
    """The penalty counts every started hour: 2 minutes late costs a whole hour's points.  The page says "2 min",
    never "0.0" hours beside a penalty."""
    import datetime as dt
    due = dt.datetime(2026, 12, 18, 23, 59)
    row = StudentRow("ada", ASSIGNMENT, due + dt.timedelta(minutes=2, seconds=30), due, None, 40.0, 2.0, 50.0)
    report = class_report.ClassReport(ASSIGNMENT, [ASSIGNMENT], due, 50.0, [row], [], [], {}, {}, [], [],
                                      dt.datetime(2026, 12, 20))
    page = class_report.render_html(report, language)
    for anchor in ("lateness", "students"):
        section = _section(page, anchor)
        ada = section[section.index("<td>ada</td>"):]
        ada = ada[:ada.index("</tr>")]
        assert late_by in ada and '<td class="n">0.0</td>' not in ada and '<td class="n">2.0</td>' in ada, ada
