"""The class report read offline: opened from file:// in Chromium with every request to another host refused,
its two plots drawn from the page itself, both editions in them.  A few seconds: the synthetic class written
into the gradebook (nobody graded for real), one report, one page load."""
from __future__ import annotations

import pytest

from rlhf_course import ASSIGNMENT
from rlhf_course.grading import class_report
from tests.support import synthetic_class


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    import answer_catalogue

    from tests.support.course import copy_course, release_course
    root = copy_course(tmp_path_factory.mktemp("class-offline") / "course")
    release_course(root)
    synthetic_class.build(root, answer_catalogue, real=False)
    return class_report.write_reports(root, [ASSIGNMENT])[0]


def test_the_class_report_shows_everything_with_the_network_cut(report, browser, artifacts):
    asked = []
    context = browser.new_context(viewport={"width": 1200, "height": 900})
    page = context.new_page()

    def refuse_other_hosts(route):
        if not route.request.url.startswith("file://"):
            asked.append(route.request.url)
            return route.abort()
        return route.continue_()
    page.route("**/*", refuse_other_hosts)
    try:
        page.goto(report.html.as_uri(), wait_until="load")
        page.wait_for_timeout(200)
        drawn = page.eval_on_selector_all("img", "images => images.map(i => [i.naturalWidth, i.naturalHeight])")
        headings = page.locator("h2").all_inner_texts()
        legend = page.locator("table").first.inner_text()
        page.screenshot(path=str(artifacts / "class_report.png"), full_page=True)
    finally:
        context.close()
    assert asked == []
    assert len(drawn) == 2 and all(w > 400 and h > 200 for w, h in drawn)
    assert headings == ["Score distribution", "Manual grading still to do", "Hidden tests", "Misconceptions named",
                        "Lateness", "Students"]
    assert all(edition in legend for edition in synthetic_class.EDITIONS)
