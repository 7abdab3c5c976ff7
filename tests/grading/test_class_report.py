"""The class report of a synthetic class (60 students across both editions of the first assignment, built
from the answer catalogue and the reference, some late, one with an extension; 56 written into the gradebook,
then four graded for real, in-process, by the batch that writes the report): every number of its CSV equals the
one computed here from the class's plans, and its page escapes what students shaped and links their feedback pages."""
from __future__ import annotations

import csv
import datetime as dt
import re
import urllib.parse
from pathlib import Path

import numpy as np
import pytest

from rlhf_course import ASSIGNMENT, NOTEBOOK
from rlhf_course.grading import app
from rlhf_course.grading.pages import class_report
from rlhf_course.course.settings import Course
from tests.support import synthetic_class
from tests.support.course import cell_points, copy_course, release_course
from tests.support.synthetic_class import DUE, EDITIONS, HOSTILE_ID, WRITTEN, expected_penalty

pytestmark = pytest.mark.slow  # the shared release, then four submissions graded in-process


@pytest.fixture(scope="module")
def graded_class(tmp_path_factory):
    """The class, whose report is the one the batch grading the four real students wrote (as `make grade`)."""
    import rlhf_catalogue
    root = copy_course(tmp_path_factory.mktemp("class") / "course")
    release_course(root)
    plans = synthetic_class.build(root, rlhf_catalogue)
    folder = root / class_report.FOLDER
    written = class_report.Written(ASSIGNMENT, folder / f"{ASSIGNMENT}.html", folder / f"{ASSIGNMENT}.csv", len(plans))
    by_the_batch = written.csv.read_text()
    assert ",student,rlhf_zh,r_ben,score," in by_the_batch and ",student,rlhf,s00,score," in by_the_batch
    return root, plans, written


def _expected(plans) -> dict[tuple[str, str, str, str], object]:
    """(section, edition, item, measure) -> value, for every row the CSV must have, computed from the plans."""
    points = cell_points(ASSIGNMENT)
    tests = [g for g in points if g not in WRITTEN]
    out: dict = {}
    cells, raw, score, penalty = {}, {}, {}, {}
    for p in plans:
        cells[p.student] = {g: 0.0 if g in p.lost else points[g] for g in tests}
        raw[p.student] = sum(cells[p.student].values()) + sum(v or 0.0 for v in p.written.values())
        penalty[p.student] = expected_penalty(p, points)
        score[p.student] = max(0.0, raw[p.student] - penalty[p.student])
    for edition in ("all", *EDITIONS):
        values = np.array([score[p.student] for p in plans if edition in ("all", p.edition)])
        for measure, value in (("students", len(values)), ("mean", values.mean()), ("median", np.median(values)),
                               ("sd", values.std(ddof=1)), ("min", values.min()), ("max", values.max())):
            out[("distribution", edition, "score", measure)] = value
    out[("distribution", "all", "score", "max_score")] = sum(points.values())
    out[("roster", "all", "", "students")] = out[("roster", "all", "", "submitted")] = len(plans)
    out[("roster", "all", "", "missing")] = ""  # every student of the roster submitted
    for g in tests:
        passed = np.array([float(g not in p.lost) for p in plans])
        rest = np.array([raw[p.student] - cells[p.student][g] for p in plans])
        r = None if passed.std() == 0 or rest.std() == 0 else np.corrcoef(passed, rest)[0, 1]
        flags = (["nobody passes"] if passed.sum() == 0 else []) + (["everybody passes"] if passed.all() else []) \
            + (["negative discrimination"] if r is not None and r < -2 / np.sqrt(len(plans)) else [])
        for measure, value in (("points", points[g]), ("students", len(plans)), ("passed", passed.sum()),
                               ("pass_rate", passed.mean()), ("mean_score", np.mean([cells[p.student][g] for p in plans])),
                               ("discrimination", "" if r is None else r), ("flags", "; ".join(flags))):
            out[("test", "all", g, measure)] = value
    to_do = {q: [p.student for p in plans if p.written[q] is None] for q in WRITTEN}
    out[("manual", "all", "", "to_do")] = sum(len(s) for s in to_do.values())
    for q, students in to_do.items():
        if students:
            out[("manual", "all", q, "to_do")] = len(students)
            out[("manual", "all", q, "students")] = set(students)
    named: dict[str, set] = {}
    for p in plans:
        for entry in (p.wrong if p.named else ()):
            named.setdefault(entry, set()).add(p.student)
    for entry, students in named.items():
        out[("misconception", "all", entry, "students")] = len(students)
        out[("misconception", "all", entry, "who")] = students
    out[("misconception", "all", "", "not_named")] = sum(1 for p in plans if not p.named)
    for p in plans:
        deadline = DUE + dt.timedelta(hours=p.extension_hours)
        late = max(0.0, (p.submitted - deadline).total_seconds() / 3600)
        feedback = (f"../feedback/{urllib.parse.quote(p.student)}/{p.edition}/{NOTEBOOK.replace('.ipynb', '.html')}"
                    if p.real else "")
        for measure, value in (("timestamp", p.submitted.isoformat()), ("deadline", deadline.isoformat()),
                               ("extension_hours", p.extension_hours), ("hours_late", late),
                               ("raw_score", raw[p.student]), ("penalty", penalty[p.student]),
                               ("score", score[p.student]), ("max_score", sum(points.values())),
                               ("manual_to_do", sum(1 for v in p.written.values() if v is None)),
                               ("misconceptions", set(p.wrong) if p.named else "not named"), ("feedback", feedback)):
            out[("student", p.edition, p.student, measure)] = value
    out[("lateness", "all", "", "late")] = sum(1 for p in plans if p.submitted > DUE + dt.timedelta(hours=p.extension_hours))
    out[("lateness", "all", "", "penalised")] = sum(1 for p in plans if penalty[p.student] > 0)
    out[("lateness", "all", "", "extensions")] = sum(1 for p in plans if p.extension_hours)
    out[("collect", ASSIGNMENT, "'=HYPERLINK(\"http://x\")+rlhf+2026", "refused")] = (
        "malformed entry name (not <student>+<assignment>+<timestamp>[+<random>])")
    out[("collect", EDITIONS[1], "r_ben+rlhf_zh+2026-12-19 03:29:00 UTC", "collected")] = (
        "the entry name claims 3.5 h before the kernel time")
    return out


def _same(got: str, expected) -> bool:
    if isinstance(expected, set):
        return set(filter(None, got.split("; "))) == expected
    if isinstance(expected, str):
        return got == expected
    return got != "" and abs(float(got) - float(expected)) <= 1e-5 * max(1.0, abs(float(expected)))


def test_every_number_of_the_csv_is_the_one_computed_from_the_class(graded_class):
    root, plans, written = graded_class
    assert len(plans) == 60 and {p.edition for p in plans} == set(EDITIONS)
    assert sum(1 for p in plans if p.extension_hours) == 1 and sum(1 for p in plans if p.submitted > DUE) >= 5
    with open(written.csv, newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert {r["assignment"] for r in rows} == {ASSIGNMENT}
    got = {(r["section"], r["edition"], r["item"], r["measure"]): r["value"] for r in rows}
    assert len(got) == len(rows), "one row per number"
    expected = _expected(plans)
    assert set(got) == set(expected)
    wrong = {key: (got[key], expected[key]) for key in expected if not _same(got[key], expected[key])}
    assert wrong == {}
    # each flag shows: the broken test, the tests no catalogued mistake loses, the unclear instruction
    assert got[("test", "all", synthetic_class.BROKEN, "flags")] == "nobody passes"
    assert "negative discrimination" in got[("test", "all", synthetic_class.UNCLEAR, "flags")]
    assert "everybody passes" in got[("test", "all", "gae_shape", "flags")]


def test_the_csv_is_inert_in_a_spreadsheet(graded_class):
    text = Path(graded_class[2].csv).read_text()
    cells = [cell for row in csv.reader(text.splitlines()) for cell in row]
    assert not [c for c in cells if c.startswith(("=", "+", "@"))]
    assert HOSTILE_ID in cells  # kept as the student's id, quoted for nothing else


def test_the_page_escapes_what_students_shaped_and_links_their_feedback(graded_class):
    root, plans, written = graded_class
    page = Path(written.html).read_text()
    assert "<img src=x" not in page and "&lt;img src=x onerror=alert(1)&gt;" in page
    assert "<script" not in page.lower()
    assert re.findall(r'<img [^>]*src="([^"]{0,22})', page) == ["data:image/png;base64,"] * 2
    every_link = re.findall(r'<a href="([^"#][^"]*)"', page)
    formgrader = [link for link in every_link if link.startswith("http://localhost:8888/formgrader/submissions/")]
    assert all(re.fullmatch(r"http://localhost:8888/formgrader/submissions/[0-9a-f]{32}/", link) for link in formgrader)
    assert len(set(formgrader)) == len(plans)  # each student's submission (test_class_report_office_hours.py)
    links = [link for link in every_link if link not in formgrader]
    assert len(links) == sum(p.real for p in plans)
    for link in links:
        assert "://" not in link and (Path(written.html).parent / urllib.parse.unquote(link)).is_file()
    assert "point-biserial" in page and f"r &lt; {-2 / 60 ** 0.5:.2f} for 60 submissions" in page
    assert "Misconceptions were not named for 10 of 60" in page
    assert "\u53cc" not in page, "misconceptions are named in English for the instructor"  # zh names stay out


def test_the_report_command_writes_an_editions_base_in_chinese_with_the_same_numbers(graded_class, capsys):
    root, plans, written = graded_class
    english_csv, english_page = written.csv.read_bytes(), written.html.read_bytes()
    assert len(english_csv) > 1000
    try:
        assert app.main(["report", "--course-root", str(root), "--language=zh-CN", EDITIONS[1]]) == 0
        assert f"{ASSIGNMENT}: 60 student(s): {written.html}" in capsys.readouterr().out
        page = written.html.read_text()
        assert written.csv.read_bytes() == english_csv  # the numbers and identifiers are the same in every language
        assert '<html lang="zh-CN">' in page and "班级报告：rlhf" in page and "点二列相关系数" in page
        assert "双重裁剪" in page  # r_dev's misconception, named in Chinese from the catalogue
        assert "&lt;img src=x onerror=alert(1)&gt;" in page and "<img src=x" not in page
    finally:
        written.html.write_bytes(english_page)  # the English page back for the other tests (the CSV is the same)
    assert app.main(["report", "--course-root", str(root), "rlhf_final"]) == 2
    assert "no assignment 'rlhf_final' in the gradebook" in capsys.readouterr().err
    assert not (written.html.parent / "rlhf_final.html").exists() and written.csv.read_bytes() == english_csv
    assert app.main(["report", "--course-root", str(root), "--language=fr", ASSIGNMENT]) == 2


def test_a_misconception_record_graded_again_since_or_not_named_counts_as_not_named(tmp_path):
    from rlhf_course.grading.gradebook import misconception_record
    from rlhf_course.grading.results import CRASHED, GRADED, NamedMisconception, SubmissionResult
    named = SubmissionResult("ada", GRADED, ASSIGNMENT, NOTEBOOK,
                             misconceptions=[NamedMisconception("ppo_no_clipping", "ppo_clipped_objective", "No clipping",
                                                                "", "")])
    crashed = SubmissionResult("ben", CRASHED, ASSIGNMENT, NOTEBOOK)
    stamps = {(ASSIGNMENT, "ada"): "2026-12-18T10:00:00", (ASSIGNMENT, "ben"): "2026-12-18T11:00:00"}
    misconception_record.record(Course.at(tmp_path), [named, crashed], stamps, named_by_course=True)
    record = misconception_record.read(Course.at(tmp_path))
    assert misconception_record.named_for(record, ASSIGNMENT, "ada", "2026-12-18T10:00:00") == [
        {"entry": "ppo_no_clipping", "function": "ppo_clipped_objective", "name": "No clipping"}]
    assert misconception_record.named_for(record, ASSIGNMENT, "ada", "2026-12-19T09:00:00") is None  # stock since
    assert misconception_record.named_for(record, ASSIGNMENT, "ben", "2026-12-18T11:00:00") is None  # not scored
    assert misconception_record.named_for(record, ASSIGNMENT, "cleo", "") is None  # never graded by us
    misconception_record.record(Course.at(tmp_path), [named], stamps, named_by_course=False)  # the course turned naming off
    assert misconception_record.named_for(misconception_record.read(Course.at(tmp_path)), ASSIGNMENT, "ada",
                                          "2026-12-18T10:00:00") is None
    (tmp_path / misconception_record.RECORD).write_text("[1, 2")
    with pytest.raises(ValueError, match="is not the misconception record trusted grading writes"):
        misconception_record.read(Course.at(tmp_path))


def test_every_sentence_of_the_report_has_its_chinese():
    """A sentence added to the page or its plots without a translation would reach a Chinese report in English."""
    import ast

    from rlhf_course import i18n
    module = Path(class_report.__file__)
    template = (module.parent / "templates" / "class_report" / "index.html.j2").read_text()
    sentences = set(re.findall(r'_\("((?:[^"\\]|\\.)*)"', template)) | set(re.findall(r"_\('([^']*)'", template))
    sentences |= {node.args[0].value for node in ast.walk(ast.parse(module.read_text()))
                  if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "t"
                  and node.args and isinstance(node.args[0], ast.Constant)}
    sentences |= {"nobody passes", "everybody passes", "negative discrimination"}  # the flags, translated in the page
    assert len(sentences) > 60
    assert sorted(sentences - set(i18n.ZH)) == []


def test_a_flood_of_inbound_entries_leaves_the_page_small_and_the_csv_whole(graded_class):
    """A student can make inbound entries by the thousand: the page shows the first ones and says how many it left
    out; collect_report.csv, which the instructor is sent to, keeps them all."""
    root, plans, written = graded_class
    report_csv = root / "collect_report.csv"
    before = report_csv.read_text()
    flood = [f"{ASSIGNMENT},,eve{i}+rlhf+x,refused,malformed timestamp in the entry name,,,\n" for i in range(2000)]
    try:
        report_csv.write_text(before + "".join(flood))
        course = Course.at(root)
        group = [ASSIGNMENT, *EDITIONS[1:]]
        report = class_report.build(course, ASSIGNMENT, group)
        shown = class_report.COLLECT_ROWS_SHOWN
        assert len(report.collect) == shown and report.collect_left_out == 2002 - shown  # 2 of the fixture's own
        page = class_report.render_html(report)
        assert f"{2002 - shown} more entries not collected or flagged times are left out of this page" in page
        assert "eve1999+rlhf+x" not in page and len(page) < 2 * len(class_report.render_html(
            class_report.build(course.with_config(StrictExchangeCollect={"report_name": "none.csv"}), ASSIGNMENT,
                               group)))
        zh = class_report.render_html(report, "zh-CN")
        assert f"另有 {2002 - shown} 个未予收取的条目或有疑问的时间未在本页列出" in zh
        assert ["", "left out (collect_report.csv lists them)", 2002 - shown] == class_report.csv_rows(report)[-1][-3:]
    finally:
        report_csv.write_text(before)
