"""The class report read offline, in English and in Chinese: opened from file:// in Chromium with every request to
another host refused, its two plots drawn from the page itself, both editions in them.  A few seconds: the
synthetic class written into the gradebook (nobody graded for real), two reports, two page loads."""
from __future__ import annotations

import pytest

from rlhf_course import ASSIGNMENT
from rlhf_course.grading.pages import class_report
from rlhf_course.i18n import CHINESE, ENGLISH
from rlhf_course.course.settings import Course
from tests.support import browser as browser_support, synthetic_class

HEADINGS = {ENGLISH: ["Students by score, lowest first", "Score distribution", "Manual grading still to do",
                      "Hidden tests", "Misconceptions named", "Lateness", "Students"],
            CHINESE: ["学生按成绩排列（低分在前）", "成绩分布", "尚待人工评分", "隐藏测试", "识别出的误解", "迟交", "学生"]}


@pytest.fixture(scope="module")
def course(tmp_path_factory):
    import rlhf_catalogue

    from tests.support.course import copy_course, release_course
    root = copy_course(tmp_path_factory.mktemp("class-offline") / "course")
    release_course(root)
    synthetic_class.build(root, rlhf_catalogue, real=False)
    return root


@pytest.fixture(scope="module")
def offline_page(browser):
    """One page for both languages, every request to another host refused and noted in ``asked``."""
    page, asked = browser_support.offline_page(browser, {"width": 1200, "height": 900})
    yield page, asked
    page.context.close()


@pytest.mark.parametrize("language", [ENGLISH, CHINESE])
def test_the_class_report_shows_everything_with_the_network_cut(course, offline_page, artifacts, language):
    page, asked = offline_page
    asked.clear()
    course_handle = Course.at(course)
    report = class_report.write_reports(course_handle, [ASSIGNMENT], language=language)[0]
    page.goto(report.html.as_uri(), wait_until="load")  # its images are data: URIs, decoded by "load"
    assert page.evaluate("document.documentElement.lang") == language  # this language's page, not the last one
    drawn = page.eval_on_selector_all("img", "images => images.map(i => [i.naturalWidth, i.naturalHeight])")
    headings = page.locator("h2").all_inner_texts()
    legend = page.locator("table").first.inner_text()
    page.screenshot(path=str(artifacts / f"class_report_{language}.png"), full_page=True)
    assert asked == []
    assert len(drawn) == 2 and all(w > 400 and h > 200 for w, h in drawn)
    assert headings == HEADINGS[language]
    assert all(edition in legend for edition in synthetic_class.EDITIONS)
