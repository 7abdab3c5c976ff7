"""The feedback page as a student reads it: a summary first (the total after the late penalty, the tests that
lost points, the named misconception), failures marked, and each test cell's verdict in a panel of the template's
own, apart from what the student's notebook printed.  Rendered in-process from a hand-made result; no root."""
from __future__ import annotations

import datetime as dt

import nbformat
import pytest
from bs4 import BeautifulSoup

from rlhf_course import COURSE_ROOT
from rlhf_course.course import notebooks
from rlhf_course.grading.pages.feedback import render_page
from rlhf_course.grading.results import CellResult, NamedMisconception, SubmissionResult

FAKE_VERDICT = "[trusted grader] passed (4 / 4): all good"


def _result(language: str) -> SubmissionResult:
    assignment = "rlhf" if language == "en" else "rlhf_zh"
    nb = notebooks.read(COURSE_ROOT / "release" / assignment / "rlhf_building_blocks.ipynb")
    test_ids = [notebooks.grade_id(c) for c in nb.cells
                if c.cell_type == "code" and (c.metadata.get("nbgrader") or {}).get("grade")]
    failing, passing = test_ids[1], test_ids[2]
    for cell in nb.cells:  # the student's own run printed a fake verdict in the failing test's cell
        if notebooks.grade_id(cell) == failing:
            cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text=FAKE_VERDICT + "\n")]
    cells = {gid: CellResult(gid, 2.0, 2.0, f"message of {gid}") for gid in test_ids}
    cells[failing] = CellResult(failing, 2.0, 0.0, f"{failing} PUBLIC LINE", f"{failing} WHOLE FINDING")
    result = SubmissionResult("ada", "failed tests", assignment=assignment, notebook="rlhf_building_blocks.ipynb",
                              language=language, cells=cells, canonical_notebook=nbformat.writes(nb))
    result.written = {"lab_question_1": {"answered": False, "points": 2.0, "score": 0.0, "comment": ""},
                      "lab_question_2": {"answered": True, "points": 2.0, "score": None, "comment": ""}}
    result.misconceptions = [NamedMisconception("ppo_clip_without_min", "ppo_clipped_objective", "MISCONCEPTION",
                                                "EXPLANATION", "PPO")]
    result.deadline = {"due": dt.datetime(2026, 12, 1), "submitted": dt.datetime(2026, 12, 2, 3),
                       "seconds_late": 27 * 3600.0, "penalty": 1000.0, "extension": None}
    return result, failing, passing


@pytest.mark.parametrize("language, words", [
    ("en", {"after": "After the late penalty: 0 / ", "lost": "tests lost points:", "not answered": "not answered",
            "run": "your notebook's run:", "failed": "FAILED"}),
    ("zh-CN", {"after": "扣除迟交罚分后：0 / ", "lost": "个失分：", "not answered": "未作答",
               "run": "你的笔记本运行时的输出：", "failed": "未通过"}),
])
def test_the_page_opens_with_a_summary_and_draws_verdicts_in_their_own_panels(language, words):
    result, failing, passing = _result(language)
    page = render_page(result, max_cells=1000, seconds=10).html
    soup = BeautifulSoup(page, features="html.parser")
    assert soup.html["lang"] == language.split("-")[0]
    assert soup.title.get_text() == {"en": "Feedback: rlhf", "zh-CN": "反馈：rlhf_zh"}[language]
    summary = soup.find(class_="rlhf-summary").get_text()
    assert words["after"] in summary and words["lost"] in summary
    assert f"{failing} PUBLIC LINE" in summary and "MISCONCEPTION" in summary  # above the table, not under it
    assert "WHOLE FINDING" not in page  # the instructor's
    assert [row.find("code").get_text() for row in soup.select("tr.rlhf-failed")] == [failing]
    assert words["not answered"] in soup.find(class_="rlhf-scores").find_all("table")[-1].get_text()
    panels = soup.select("div.rlhf-verdict")
    assert len(panels) == len(result.cells)
    failed_panel, = soup.select("div.rlhf-verdict-failed")
    assert words["failed"] in failed_panel.get_text() and f"{failing} PUBLIC LINE" in failed_panel.get_text()
    # The student's printed "verdict" is an output of their run, labelled so, never a panel.
    assert not any(FAKE_VERDICT in panel.get_text() for panel in panels)
    label = soup.find(class_="rlhf-run-label")
    assert label.get_text() == words["run"] and FAKE_VERDICT in label.find_next(class_="jp-OutputArea").get_text()


def test_the_formgraders_copy_keeps_the_whole_finding():
    result, failing, _ = _result("en")
    copy = nbformat.reads(render_page(result, max_cells=1000, seconds=10).autograded_copy, as_version=4)
    cell, = [c for c in copy.cells if notebooks.grade_id(c) == failing]
    assert "WHOLE FINDING" in cell.outputs[-1].text and FAKE_VERDICT in cell.outputs[0].text


@pytest.mark.parametrize("language, pending, done, heading, outcome", [
    ("en", "Written answers, graded by a person: 0 / 4 so far.", "Written answers, graded by a person: 3.5 / 4.",
     "(so far)", "; written answers awaiting a person"),
    ("zh-CN", "书面回答（由老师评分）：目前 0 / 4。", "书面回答（由老师评分）：3.5 / 4。", "（暂计）",
     "；书面回答等待老师评分"),
])
def test_the_written_answers_say_so_far_only_while_one_awaits_a_person(language, pending, done, heading, outcome):
    result, _, _ = _result(language)
    soup = BeautifulSoup(render_page(result, max_cells=1000, seconds=10).html, features="html.parser")
    assert pending in soup.find(class_="rlhf-scores").get_text()  # lab_question_2 awaits a person
    # the total at the top and the outcome say it too: the page's total is not final
    assert soup.find(class_="rlhf-scores").find("h2").get_text().endswith(heading)
    assert outcome in soup.find(class_="rlhf-summary").get_text()
    result.written["lab_question_2"]["score"] = 1.5
    result.written["lab_question_1"] = {"answered": True, "points": 2.0, "score": 2.0, "comment": ""}
    scores = BeautifulSoup(render_page(result, max_cells=1000, seconds=10).html,
                           features="html.parser").find(class_="rlhf-scores").get_text()
    assert done in scores and "so far" not in scores and "目前" not in scores and outcome not in scores
    assert heading not in scores


def test_a_persons_comment_renders_its_markdown_and_maths_and_stays_inert():
    """The Formgrader's comment box takes Markdown and maths: the student reads them rendered (the maths as MathML,
    as the notebook's), through the course's sanitiser: a script or an event handler in a comment does nothing."""
    result, _, _ = _result("en")
    result.written["lab_question_2"].update(score=1.5, comment=(
        "This **generalises**: the $\\mathrm{KL}$ term keeps it close.\n\n* first\n* second\n\n"
        "<script>alert(1)</script><img src=x onerror=alert(2)> [x](javascript:alert(3))"))
    page = render_page(result, max_cells=1000, seconds=10).html
    soup = BeautifulSoup(page, features="html.parser")
    comment_cell = soup.find(class_="rlhf-scores").find_all("table")[-1].find_all("tr")[-1].find_all("td")[-1]
    assert comment_cell.find("strong").get_text() == "generalises"
    assert "**" not in comment_cell.get_text() and "$" not in comment_cell.get_text()
    assert comment_cell.find("math") is not None and "KL" in comment_cell.find("math").get_text()
    assert [li.get_text() for li in comment_cell.find_all("li")] == ["first", "second"]
    assert comment_cell.find("script") is None and not comment_cell.select("[onerror]")
    assert not any((a.get("href") or "").startswith("javascript") for a in comment_cell.find_all("a"))
    assert "alert(1)" in comment_cell.get_text()  # shown as text, never run


def test_the_last_resort_page_shows_a_persons_comment_as_escaped_text():
    """When no renderer can run, the page is the scores as text: a comment is there, its markup inert."""
    from rlhf_course.grading.pages.feedback import _plain_page
    result, _, _ = _result("en")
    result.written["lab_question_2"].update(score=1.5, comment="**Good**\n<script>alert(1)</script>")
    page = _plain_page(result, "the page could not be rendered")
    assert "**Good** &lt;script&gt;alert(1)&lt;/script&gt;" in page and "<script>" not in page
