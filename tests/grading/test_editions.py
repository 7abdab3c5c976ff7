"""Language editions: one English source, a translation file, a generated edition that differs only
in prose, stale translations found, one export row per student whatever edition they chose."""
import csv
import json
import re
from collections import Counter

import pytest
import torch

from rlhf_course.grading import app, checks as checks_module, editions, instructor, release
from rlhf_course.course import notebooks, settings
from rlhf_course.grading.gradebook.export import EditionsCsvExport
from rlhf_course.course.settings import Course
from tests.support.course import REPO, repo_course
from tests.support.english import english_phrases

COURSE_EDITIONS = editions.editions(repo_course())
# Inline math and code spans may wrap a line (Chinese prose keeps a paragraph on one line): compare
# them with whitespace runs collapsed, fenced code blocks on their own.
MATH = re.compile(r"\$\$.+?\$\$|\$[^$]+?\$", re.DOTALL)
FENCE = re.compile(r"^```.*?^```", re.DOTALL | re.MULTILINE)
CODE_SPAN = re.compile(r"`[^`]+`")


# A line's label in an output block ("scaled:   [[...", as the visible test prints it in the edition's language), and
# words in math (\text{at the sampled token}: with a space or in Chinese; \text{ref} is a name and stays compared).
OUTPUT_LABEL = re.compile(r"^[^\[\]\d\s-][^:\uff1a\n]*[:\uff1a] *", re.MULTILINE)
MATH_WORDS = re.compile(r"\\text\{[^{}]*(?: |[\u4e00-\u9fff\uff08-\uff1a])[^{}]*\}")


def spans(text: str) -> dict[str, list[str]]:
    """The fenced blocks (in order), the math and the inline code (sorted) of one markdown cell.  A
    ```python block is compared as code: its comments may be translated, nothing else; an output block
    without its lines' labels; math without the words of its \\text{...}."""
    fences = [editions.code_skeleton(block.split("\n", 1)[1].rsplit("```", 1)[0]) if block.startswith("```python")
              else OUTPUT_LABEL.sub("", block) for block in FENCE.findall(text)]
    prose = FENCE.sub("", text)
    squash = lambda found: sorted(" ".join(MATH_WORDS.sub(r"\\text{}", span).split()) for span in found)  # noqa: E731
    return {"fences": fences, "math": squash(MATH.findall(prose)), "code": squash(CODE_SPAN.findall(prose))}


def base_checks(edition):
    return instructor.load_module(repo_course(), instructor.checks_module_name(edition.base)).CHECKS


def test_the_course_has_a_chinese_edition_of_every_assignment_that_has_one():
    assert [(e.assignment, e.base, e.language) for e in COURSE_EDITIONS] == [("grpo_zh", "grpo", "zh-CN"),
                                                                            ("kl_penalty_zh", "kl_penalty", "zh-CN"),
                                                                            ("rlhf_zh", "rlhf", "zh-CN")]


@pytest.mark.parametrize("edition", COURSE_EDITIONS, ids=lambda e: e.assignment)
def test_every_translation_was_made_from_the_current_english(edition):
    """Fails when an English cell or check message changed and its translation was not revisited."""
    assert editions.problems(repo_course(), edition, base_checks(edition)) == []


@pytest.mark.parametrize("edition", COURSE_EDITIONS, ids=lambda e: e.assignment)
def test_the_generated_edition_source_is_in_sync(edition, course):
    built = editions.build_source(Course.at(course), editions.edition_of(Course.at(course), edition.assignment), base_checks(edition))
    for path in built:
        committed = REPO / "source" / edition.assignment / path.name
        assert path.read_text() == committed.read_text(), f"{committed} is stale: run `make release` and commit"


@pytest.mark.parametrize("edition", COURSE_EDITIONS, ids=lambda e: e.assignment)
def test_the_releases_differ_only_in_prose(edition):
    """Same cells, ids, grade ids, points and code (but the language line; comments, docstrings and
    messages may be translated); each markdown cell keeps its math and code spans."""
    for english_path in sorted((REPO / "release" / edition.base).glob("*.ipynb")):
        english = notebooks.read(english_path)
        translated = notebooks.read(REPO / "release" / edition.assignment / english_path.name)
        assert [(c.id, c.cell_type) for c in english.cells] == [(c.id, c.cell_type) for c in translated.cells]
        introduction = next(c for c in english.cells if c.cell_type == "markdown")
        for en, zh in zip(english.cells, translated.cells):
            meta = lambda cell: {k: v for k, v in cell.metadata.get("nbgrader", {}).items() if k != "checksum"}  # noqa: E731
            assert meta(en) == meta(zh), en.id
            if en.cell_type == "code":
                expected = en.source
                if editions.is_set_up_cell(en):
                    expected = en.source.rstrip("\n") + "\n\n" + editions.language_line(edition.language)
                assert editions.code_skeleton(zh.source) == editions.code_skeleton(expected), \
                    f"code cell {en.id} differs between the editions"
            elif not notebooks.is_written_answer(en):  # (a written answer's release text is nbgrader's stub)
                assert zh.source != en.source, f"markdown cell {en.id} is not translated"
                if en is introduction:  # the Chinese introduction adds a bilingual glossary: it keeps every English span
                    for kind, found in spans(en.source).items():
                        assert not Counter(found) - Counter(spans(zh.source)[kind]), (en.id, kind)
                else:
                    assert spans(zh.source) == spans(en.source), en.id


@pytest.mark.parametrize("edition", COURSE_EDITIONS, ids=lambda e: e.assignment)
def test_a_chinese_release_says_where_to_write_in_chinese(edition):
    """nbgrader's answer stubs, in the edition's language: every solution cell of the Chinese release
    ends with the Chinese stub (code: the same `raise NotImplementedError()`), none of nbgrader's English
    stubs is left, and the English release keeps them (the stubs are per notebook, not per run)."""
    stubs = editions.ANSWER_STUBS[edition.language]
    assert editions.code_skeleton(stubs["code"]) == editions.code_skeleton("# YOUR CODE HERE\nraise NotImplementedError()")
    for english_path in sorted((REPO / "release" / edition.base).glob("*.ipynb")):
        english = notebooks.read(english_path)
        translated = notebooks.read(REPO / "release" / edition.assignment / english_path.name)
        answers = [(en, zh) for en, zh in zip(english.cells, translated.cells)
                   if en.metadata.get("nbgrader", {}).get("solution")]
        assert answers
        for en, zh in answers:
            if en.cell_type == "code":
                assert en.source.endswith("# YOUR CODE HERE\n    raise NotImplementedError()"), en.id
                assert zh.source.endswith("\n    ".join(stubs["code"].splitlines())), zh.id
            else:  # each written answer's stub names its question: Validate lists which is unanswered
                question = en.metadata["nbgrader"]["grade_id"]
                assert (en.source, zh.source) == (f"YOUR ANSWER HERE ({question})",
                                                  editions.question_stub(stubs["text"], question)), en.id
                assert question in zh.source
        assert "YOUR CODE HERE" not in str(translated) and "YOUR ANSWER HERE" not in str(translated)
    setup = next(c for c in translated.cells if editions.is_set_up_cell(c))
    assert setup.source.endswith("i18n.set_language('zh-CN')  # " + editions.LANGUAGE_LINE_COMMENT["zh-CN"])


def pseudo_translation(course, base="rlhf", assignment="rlhf_xx", language="zh-CN"):
    """A complete translation file whose 'translation' marks the English (the mechanism, not the prose)."""
    table = {"assignment": assignment, "base": base, "language": language, "cells": {}, "messages": {}}
    for path in (course / "source" / base).glob("*.ipynb"):
        for cell in notebooks.read(path).cells:
            if editions.translatable(cell):
                table["cells"][cell.id] = {"english_sha256": editions.english_sha256(cell.source),
                                           "text": "[译] " + cell.source}
    checks = instructor.load_module(Course.at(course), instructor.checks_module_name(base)).CHECKS
    for check_id, check in checks.items():
        table["messages"][check_id] = {"english_sha256": editions.english_sha256(check.message),
                                       "text": "[译] " + check.message}
    table["details"] = {template: "[译] " + template for template in editions.said_templates(Course.at(course), base)}
    # the term table defines the short form the catalogue's Chinese uses (a glossary's "defined_as")
    first = next(iter(table["cells"]))
    table["cells"][first]["text"] += "\n\n| 裁剪代理目标（简称裁剪目标） | clipped surrogate objective |"
    for old in (course / "i18n").glob("*.json"):
        old.unlink()
    path = course / "i18n" / f"{base}.{language}.json"
    editions.write_table(path, table)
    return editions.Edition(assignment, base, language, path), checks


def test_the_docs_name_the_language_menu_entry_as_jupyterlab_shows_it():
    """JupyterLab's Settings > Language lists the pinned pack as '<its name in the current language> - <its own
    name>'; a student switching from the English interface clicks the entry these pages name, so they name it as
    it reads there."""
    from jupyterlab_server.translation_utils import get_display_name

    entry = f"{get_display_name('zh_CN', 'en')} - {get_display_name('zh_CN', 'zh_CN')}"
    for page in ("README.zh-CN.md", "docs/editions.md"):
        assert entry in (REPO / page).read_text(encoding="utf-8"), page


def test_the_set_up_cell_is_found_by_its_grade_id_and_its_absence_stops_the_build(course):
    """kl_penalty's set-up cell has a generated id; without the language line its edition would run
    and grade in English."""
    edition, _ = pseudo_translation(course)
    nb = notebooks.read(course / "source" / "rlhf" / "rlhf_building_blocks.ipynb")
    setup = next(c for c in nb.cells if c.id == editions.SET_UP_CELL)
    setup.id = "0a1b2c3d"
    setup.metadata.setdefault("nbgrader", {})["grade_id"] = editions.SET_UP_CELL
    translated = editions.translate_notebook(nb, edition)
    assert next(c for c in translated.cells if c.id == "0a1b2c3d").source.endswith(
        editions.language_line("zh-CN"))
    nb.cells.remove(setup)
    with pytest.raises(ValueError, match="set-up code cell"):
        editions.translate_notebook(nb, edition)


def test_an_english_edit_is_caught_until_its_translation_is_revisited(course, capsys):
    edition, checks = pseudo_translation(course)
    assert editions.problems(Course.at(course), edition, checks) == []
    source = course / "source" / "rlhf" / "rlhf_building_blocks.ipynb"
    nb = notebooks.read(source)
    cell = next(c for c in nb.cells if c.cell_type == "markdown" and c.id != "intro")
    cell.source += "\n\nA sentence the instructor added."
    import nbformat
    nbformat.write(nb, str(source))
    found = editions.problems(Course.at(course), edition, checks)
    assert len(found) == 1 and f"cell {cell.id}: its English changed" in found[0]
    with pytest.raises(editions.StaleTranslation, match=cell.id):
        editions.build_source(Course.at(course), edition, checks)
    course_handle = Course.at(course)
    with pytest.raises(editions.StaleTranslation, match=cell.id):
        release.generate_release(course_handle, ["rlhf_xx"])  # `make release` refuses too
    capsys.readouterr()
    assert app.main(["release", "--course-root", str(course), "rlhf_xx"]) == 2  # one line, no traceback
    said = capsys.readouterr().err
    assert said.startswith("release did not run: ") and cell.id in said and "Traceback" not in said
    editions.revisit(edition.path, cell.id, Course.at(course))
    assert editions.problems(Course.at(course), edition, checks) == []


def test_a_missing_cell_or_message_and_lost_solution_markers_are_named(course):
    edition, checks = pseudo_translation(course)
    table = edition.table()
    written = next(cid for cid, entry in table["cells"].items() if "### BEGIN SOLUTION" in entry["text"])
    table["cells"][written]["text"] = "一个没有标记的回答"
    first_cell = next(iter(table["cells"]))
    if first_cell == written:
        first_cell = list(table["cells"])[1]
    del table["cells"][first_cell]
    del table["messages"]["ppo_gradient"]
    table["cells"]["no-such-cell"] = {"english_sha256": "0", "text": "x"}
    editions.write_table(edition.path, table)
    found = "\n".join(editions.problems(Course.at(course), edition, checks))
    assert f"cell {first_cell}: not translated" in found
    assert f"cell {written}: the translation must keep the ### BEGIN/END SOLUTION lines" in found
    assert "message ppo_gradient: not translated" in found
    assert "cell no-such-cell: in rlhf.zh-CN.json but not in source/rlhf" in found


def test_the_checks_own_sentences_are_translated_with_their_fields_and_none_left_over(course):
    """A judge's detail or a case's note (say("...")) without its Chinese, with other fields than the
    English, or a translation whose English is gone: each named; a say() of an f-string is refused."""
    edition, checks = pseudo_translation(course)
    templates = editions.said_templates(Course.at(course), "rlhf")
    assert len(templates) > 30 and "segment of {steps} steps cut before the episode ends, next_value={next_value}" in templates
    table = edition.table()
    del table["details"]["{count} tokens"]
    table["details"]["inputs of shape {shape}"] = "输入形状为 {size}"
    table["details"]["an English sentence nobody says any more"] = "旧句子"
    editions.write_table(edition.path, table)
    found = "\n".join(editions.problems(Course.at(course), edition, checks))
    assert "detail '{count} tokens': not translated" in found
    assert "detail 'inputs of shape {shape}': its translation must use the fields ['shape'], not ['size']" in found
    assert "detail 'an English sentence nobody says any more': in rlhf.zh-CN.json but no say()" in found
    module = course / "instructor" / "rlhf_hidden_checks.py"
    module.write_text(module.read_text().replace('note=say("A = 0 for all tokens")', 'note=say(f"A = {0} for all tokens")'))
    assert "say() takes a literal template" in "\n".join(editions.problems(Course.at(course), edition, checks))


def test_a_failure_reads_in_chinese_down_to_the_case_note():
    """The check's message, the judge's detail and the case's note, all in the edition's language."""
    from rlhf_course import i18n

    rlhf_hidden_checks = instructor.load_module(repo_course(), "rlhf_hidden_checks")  # the course's, with its i18n/

    def gae_one_too_long(rewards, values, next_value, gamma, gae_lambda):
        return torch.zeros(len(rewards) + 1)

    check = rlhf_hidden_checks.CHECKS["gae_bootstraps_next_value"]
    with i18n.speaking("zh-CN"):
        detail = checks_module.evaluate(check, gae_one_too_long)
    assert detail == "优势的形状是 (7,)，应为 (6,)（在回合结束前被切断的 6 步片段，next_value=2.5）"
    assert checks_module.evaluate(check, gae_one_too_long) == (
        "advantages has shape (7,), expected (6,) (segment of 6 steps cut before the episode ends, next_value=2.5)")


CATALOGUES = {"rlhf": "rlhf_catalogue", "kl_penalty": "kl_penalty_catalogue", "grpo": "grpo_catalogue"}


@pytest.mark.parametrize("base", sorted(CATALOGUES))
def test_every_wrong_answer_of_the_catalogue_fails_in_chinese(base):
    """Each wrong answer of the assignment's catalogue, judged by each check it must fail (in this
    process, in Chinese): the detail and the case's note carry no English sentence."""
    import math

    import torch.nn.functional as F
    from rlhf_course import i18n

    checks = instructor.load_module(repo_course(), instructor.checks_module_name(base)).CHECKS  # the course's i18n/
    english = []
    for wrong in instructor.load_module(repo_course(), CATALOGUES[base]).WRONG_ANSWERS:
        namespace = {"torch": torch, "F": F, "math": math}
        exec(wrong.source, namespace)
        for grade_id in sorted(wrong.loses):
            with i18n.speaking("zh-CN"):
                detail = checks_module.evaluate(checks[grade_id], namespace[checks[grade_id].function])
            assert detail is not None, (wrong.name, grade_id)
            if english_phrases(detail):
                english.append((wrong.name, grade_id, detail))
    assert english == [], "\n".join(map(str, english))


def test_the_edition_is_built_from_the_source_and_speaks_its_language(course):
    edition, checks = pseudo_translation(course)
    [built] = editions.build_source(Course.at(course), edition, checks)
    nb = notebooks.read(built)
    english = notebooks.read(course / "source" / "rlhf" / "rlhf_building_blocks.ipynb")
    setup = next(c for c in nb.cells if editions.is_set_up_cell(c))
    assert setup.source.endswith("i18n.set_language('zh-CN')  # 本版本的语言：交互图、其他图和消息")
    assert all(c.source.startswith("[译] ") for c in nb.cells if c.cell_type == "markdown")
    assert notebooks.solution_answers(nb) == notebooks.solution_answers(english)
    assert nb.metadata["rlhf_course"]["edition"] == "zh-CN"


def test_the_checks_speak_the_edition_language_with_the_same_points(course):
    edition, checks = pseudo_translation(course)
    localized = editions.localized_checks(checks, edition)
    assert localized.keys() == checks.keys()
    for check_id, check in checks.items():
        assert localized[check_id].message == "[译] " + check.message
        assert localized[check_id].cases == check.cases


def test_in_kernel_checks_fail_with_the_message_in_the_kernel_language(monkeypatch):
    from rlhf_course import i18n
    hidden = instructor.load_module(repo_course(), "rlhf_hidden_checks")  # this course's i18n/, not a copy's
    edition = editions.edition_of(repo_course(), "rlhf_zh")
    message = edition.table()["messages"]["ppo_zero_advantage"]["text"]
    monkeypatch.setattr(i18n, "_language", "zh-CN")
    with pytest.raises(AssertionError) as failure:
        hidden.run_check("ppo_zero_advantage", lambda ratio, advantage, clip_epsilon=0.2: (ratio * 0 + 1).mean())
    assert str(failure.value).startswith(f"{message}。问题所在：")
    monkeypatch.setattr(i18n, "_language", "en")
    with pytest.raises(AssertionError, match="What went wrong"):
        hidden.run_check("ppo_zero_advantage", lambda ratio, advantage, clip_epsilon=0.2: (ratio * 0 + 1).mean())


def test_export_lists_each_student_once_with_the_edition_they_chose(tmp_path):
    """Stock export would list every student once per edition; ours folds the editions in."""
    import datetime as dt
    from nbgrader.api import Gradebook

    (tmp_path / "i18n").mkdir()
    editions.write_table(tmp_path / "i18n" / "rlhf.zh-CN.json",
                         {"assignment": "rlhf_zh", "base": "rlhf", "language": "zh-CN", "cells": {}})
    url = f"sqlite:///{tmp_path / 'gradebook.db'}"
    early, late = dt.datetime(2026, 12, 1, 10), dt.datetime(2026, 12, 2, 10)
    with Gradebook(url) as gb:
        for name in ("rlhf", "rlhf_zh", "kl_penalty"):
            gb.add_assignment(name)
        for student in ("en_only", "zh_only", "both", "nobody"):
            gb.add_student(student)
        gb.add_submission("rlhf", "en_only", timestamp=early)
        gb.add_submission("rlhf_zh", "zh_only", timestamp=early)
        gb.add_submission("rlhf", "both", timestamp=early)
        gb.add_submission("rlhf_zh", "both", timestamp=late)  # the latest counts
        EditionsCsvExport(to=str(tmp_path / "grades.csv"), course_root=str(tmp_path)).export(gb)
    with open(tmp_path / "grades.csv") as handle:
        rows = list(csv.DictReader(handle))
    pairs = [(row["assignment"], row["student_id"]) for row in rows]
    assert sorted(pairs) == sorted((a, s) for a in ("rlhf", "kl_penalty")
                                   for s in ("en_only", "zh_only", "both", "nobody"))
    edition = {row["student_id"]: row["edition"] for row in rows if row["assignment"] == "rlhf"}
    assert edition == {"en_only": "rlhf", "zh_only": "rlhf_zh", "both": "rlhf_zh", "nobody": ""}


def test_nbgrader_export_uses_the_course_plugin(course):
    config = settings.course_config(course)
    assert config.ExportApp.plugin_class == "rlhf_course.grading.gradebook.export.EditionsCsvExport"
    assert json.loads(json.dumps(config.EditionsCsvExport.course_root)) == str(course)


def test_a_code_cell_translation_may_change_only_comments_docstrings_and_messages():
    english = ('def f(x, beta=0.1):\n    """Contract in English."""\n    # why\n    ### BEGIN SOLUTION\n'
               '    return beta * x\n    ### END SOLUTION\n\n'
               'assert f(2) == 0.2, f"wrong: {f(2)}"\nprint("f(2) =", f(2))\n%matplotlib inline\n')
    prose = (english.replace("Contract in English.", "中文约定。").replace("# why", "# 原因")
             .replace('f"wrong: {f(2)}"', 'f"错误：{f(2)}"').replace('"f(2) ="', '"f(2) 等于"'))
    assert editions.code_translation_problem(english, prose) is None
    for changed in (prose.replace("beta * x", "beta * x * 2"),   # a number / the logic
                    prose.replace("beta=0.1", "beta=0.2"),
                    prose.replace("def f(", "def g(").replace("f(2)", "g(2)"),  # a name
                    prose.replace("{f(2)}", "{f(3)}"),            # code inside a message
                    prose.replace("%matplotlib inline", "%matplotlib agg")):
        assert "changes code" in editions.code_translation_problem(english, changed), changed
    assert "BEGIN/END SOLUTION" in editions.code_translation_problem(
        english, prose.replace("    ### END SOLUTION\n", ""))
    assert "not valid Python" in editions.code_translation_problem(english, prose + "def (:\n")


def test_a_translated_code_cell_is_checked_applied_and_tracked(course):
    edition, checks = pseudo_translation(course)
    source = course / "source" / "rlhf" / "rlhf_building_blocks.ipynb"
    answer = next(c for c in notebooks.read(source).cells
                  if c.cell_type == "code" and "### BEGIN SOLUTION" in c.source and '"""' in c.source)
    table = edition.table()
    docstring_start = answer.source.index('"""') + 3
    translated = answer.source[:docstring_start] + "中文：" + answer.source[docstring_start:]
    table["cells"][answer.id] = {"english_sha256": editions.english_sha256(answer.source), "text": translated}
    editions.write_table(edition.path, table)
    assert editions.problems(Course.at(course), edition, checks) == []
    [built] = editions.build_source(Course.at(course), edition, checks)
    assert next(c for c in notebooks.read(built).cells if c.id == answer.id).source.startswith(translated)

    table["cells"][answer.id]["text"] = translated.replace("def ", "def renamed_", 1)
    editions.write_table(edition.path, table)
    [found] = editions.problems(Course.at(course), edition, checks)
    assert found.startswith(f"cell {answer.id}: the translation changes code")
    with pytest.raises(editions.StaleTranslation, match=answer.id):
        editions.build_source(Course.at(course), edition, checks)


@pytest.mark.parametrize("edition", COURSE_EDITIONS, ids=lambda e: e.assignment)
def test_each_hidden_test_cell_says_in_the_edition_language_what_it_checks(edition):
    messages = edition.table()["messages"]
    for path in sorted((REPO / "release" / edition.assignment).glob("*.ipynb")):
        hidden_ids = {c.id for c in notebooks.read(REPO / "source" / edition.base / path.name).cells
                      if c.cell_type == "code" and "### BEGIN HIDDEN TESTS" in c.source}
        hidden = [c for c in notebooks.read(path).cells if c.id in hidden_ids]
        assert hidden, path
        for cell in hidden:
            header = cell.source.splitlines()[0]
            assert header == editions.HIDDEN_TEST_HEADER[edition.language].format(
                points=f"{cell.metadata['nbgrader']['points']:g}",
                message=" ".join(messages[notebooks.grade_id(cell)]["text"].split())), header


def test_the_export_is_inert_in_a_spreadsheet(tmp_path):
    """A student id or a name may be what a student chose (a hub user name, a sign-up form)."""
    from nbgrader.api import Gradebook

    url = f"sqlite:///{tmp_path / 'gradebook.db'}"
    with Gradebook(url) as gb:
        gb.add_assignment("rlhf")
        gb.add_student("=1+1", last_name='=HYPERLINK("http://evil.example")', first_name="-2+3",
                       email="@SUM(A1:A9)")
        gb.add_submission("rlhf", "=1+1")
        EditionsCsvExport(to=str(tmp_path / "grades.csv"), course_root=str(tmp_path)).export(gb)
    with open(tmp_path / "grades.csv", newline="") as handle:
        (row,) = csv.DictReader(handle)
    assert (row["student_id"], row["last_name"], row["first_name"], row["email"]) == \
        ("'=1+1", '\'=HYPERLINK("http://evil.example")', "'-2+3", "'@SUM(A1:A9)")
    assert row["score"] == "0.0" and row["assignment"] == "rlhf"


def test_a_glossary_variant_anywhere_in_the_chinese_text_stops_the_release(course, monkeypatch):
    """i18n/glossary.zh-CN.json: one term per concept.  A listed variant in a cell, a check's message, a
    check's detail or the package's own Chinese sentences stops `make release`, naming where and the variant."""
    from rlhf_course import i18n

    glossary = (REPO / "i18n" / "glossary.zh-CN.json").read_text(encoding="utf-8")
    edition, checks = pseudo_translation(course)
    (course / "i18n" / "glossary.zh-CN.json").write_text(glossary, encoding="utf-8")
    assert editions.problems(Course.at(course), edition, checks) == []
    table = edition.table()
    cell = next(cid for cid, entry in table["cells"].items() if "### BEGIN SOLUTION" not in entry["text"])
    table["cells"][cell]["text"] += "\n\nPPO 的裁剪替代目标；KL 的单位是 nat，不是 nats。"
    table["messages"]["dpo_beta_scales_margin"]["text"] = "beta 在 sigmoid 内部乘以对数概率比间隔"
    table["details"]["the terminal reward must reach every step"] = "末端的奖励必须传到每一步"
    editions.write_table(edition.path, table)
    monkeypatch.setitem(i18n.ZH, "a sentence of the package", "训练一个小语言模型")
    found = editions.problems(Course.at(course), edition, checks)
    assert [line.split(" (...")[0] for line in found] == [
        f"cell {cell}: '替代目标' is not the glossary's word for '(clipped) surrogate objective': write '裁剪代理目标'",
        "message dpo_beta_scales_margin: '间隔' is not the glossary's word for "
        "'margin (log-ratio margin h, preference margin beta*h)': write '边际（对数概率比边际 / 偏好边际）'",
        "detail 'the terminal reward must reach every step': '末端的奖励' is not the glossary's word for "
        "'terminal reward': write '终止奖励'",
        "rlhf_course/i18n.py 'a sentence of the package': '小语言模型' is not the glossary's word for 'the tiny LM': "
        "write '微型语言模型'",
        f"cell {cell}: 'nat' is not the glossary's word for 'nats (unit of information)': write 'nats'",
    ] or sorted(found)
    course_handle = Course.at(course)
    with pytest.raises(editions.StaleTranslation, match=f"cell {cell}: '替代目标'"):
        release.generate_release(course_handle, ["rlhf_xx"])  # `make release` refuses


def test_a_glossary_variant_in_a_catalogue_or_the_readme_stops_the_release(course):
    """What a Chinese student reads of a named mistake (instructor/*_catalogue.py) and README.zh-CN.md are
    checked as the cells are: a variant there, or a short form the edition never defines, stops `make release`."""
    edition = editions.edition_of(Course.at(course), "rlhf_zh")
    assert editions.problems(Course.at(course), edition, base_checks(edition)) == []
    catalogue = course / "instructor" / "rlhf_catalogue.py"
    text = catalogue.read_text(encoding="utf-8")
    catalogue.write_text(text.replace("往前走；", "往前走，不需要价值网络；", 1), encoding="utf-8")
    readme = (REPO / "README.zh-CN.md").read_text(encoding="utf-8")  # (a course copy has none)
    (course / "README.zh-CN.md").write_text(readme.replace("拖动交互图的滑块", "拖动滑块演示的滑块", 1), encoding="utf-8")
    found = [line.split(" (...")[0] for line in editions.problems(Course.at(course), edition, base_checks(edition))]
    assert found == [
        "catalogue gae_forward_recursion (explanation): '价值网络' is not the glossary's word for "
        "'value head (the critic), never value network': write '价值头'",
        "README.zh-CN.md: '滑块演示' is not the glossary's word for "
        "'explorer (the interactive plot with sliders under an exercise)': write '交互图'"]
    course_handle = Course.at(course)
    with pytest.raises(editions.StaleTranslation, match="catalogue gae_forward_recursion"):
        release.generate_release(course_handle, ["rlhf_zh"])  # `make release` refuses


def test_a_short_form_needs_its_definition_in_the_edition(course):
    """裁剪目标 is the defined short form of 裁剪代理目标: usable where the edition's term table defines it."""
    edition = editions.edition_of(Course.at(course), "kl_penalty_zh")
    table = edition.table()
    cell = next(iter(table["cells"]))
    table["cells"][cell]["text"] += "\n\nPPO 的裁剪目标。"
    editions.write_table(edition.path, table)
    found = editions.problems(Course.at(course), edition, base_checks(edition))
    assert found == [f"cell {cell}: '裁剪目标', the short form of '裁剪代理目标', is used but the edition never defines it: "
                     "write '裁剪代理目标（简称裁剪目标）' in its term table (glossary.zh-CN.json)"]
    rlhf = editions.edition_of(Course.at(course), "rlhf_zh")
    assert "裁剪代理目标（简称裁剪目标）" in rlhf.table()["cells"]["intro"]["text"]


def test_the_grpo_expected_output_block_shows_the_labels_each_edition_prints():
    """A student compares the printed lines with the contract's block: the labels the edition's visible test prints,
    in its language (a Chinese label is two columns a character: the values start in one column in both lines)."""
    labels = {"grpo": ["scaled:   ", "unscaled: "], "grpo_zh": ["缩放：   ", "不缩放： "]}
    for assignment, expected in labels.items():
        cells = {c.id: c.source for c in notebooks.read(REPO / "source" / assignment / "grpo.ipynb").cells}
        block = FENCE.findall(cells["grpo_contract"])[0].splitlines()[1:-1]
        printed = [label + " " for label in re.findall(r'^print\("([^"]+)", ', cells["grpo_visible_tests"], re.MULTILINE)]
        assert [line.split("[")[0] for line in block] == printed == expected, assignment
        columns = [sum(2 if "\u3000" <= ch <= "\uffef" else 1 for ch in label) for label in printed]
        assert len(set(columns)) == 1, (assignment, columns)


@pytest.mark.parametrize("base", sorted({e.base for e in COURSE_EDITIONS}))
def test_each_english_hidden_test_header_is_its_checks_whole_message(base, course):
    """Written by `make release` from the check's message, as the Chinese headers are from its translation:
    a header never says less than the message a failing student reads; a stale one is rewritten."""
    checks = instructor.checks_of(repo_course(), base)
    for path in sorted((REPO / "source" / base).glob("*.ipynb")):
        hidden = [c for c in notebooks.read(path).cells if c.cell_type == "code" and "### BEGIN HIDDEN TESTS" in c.source]
        assert hidden, path
        for cell in hidden:
            points = cell.metadata["nbgrader"]["points"]
            assert cell.source.splitlines()[0] == editions.HIDDEN_TEST_HEADER["en"].format(
                points=f"{points:g}", unit="point" if points == 1 else "points",
                message=" ".join(checks[notebooks.grade_id(cell)].message.split()))
    path = next((course / "source" / base).glob("*.ipynb"))
    nb = notebooks.read(path)
    cell = next(c for c in nb.cells if c.cell_type == "code" and "### BEGIN HIDDEN TESTS" in c.source)
    english = cell.source
    cell.source = "# Hidden test: a shorter header\n" + english.split("\n", 1)[1]
    import nbformat
    nbformat.write(nb, str(path))
    assert editions.write_english_headers(Course.at(course), base, instructor.checks_of(Course.at(course), base)) == [path]
    assert next(c for c in notebooks.read(path).cells if c.id == cell.id).source == english


# ----------------------------------------------------------------------------- the companion notebook's edition

COMPANIONS = editions.companions(repo_course())


def test_the_companion_notebook_has_a_chinese_edition_from_the_same_mechanism():
    """notebooks/reward_hacking_frontier.ipynb (ungraded, outside source/): its translation file names it,
    the edition is written beside it, and it is no assignment (no checks, no nbgrader release)."""
    assert [(e.assignment, e.base, e.language, e.notebook) for e in COMPANIONS] == [
        ("reward_hacking_frontier_zh", "reward_hacking_frontier", "zh-CN", "notebooks/reward_hacking_frontier.ipynb")]
    [edition] = COMPANIONS
    [english] = edition.english_notebooks(repo_course())
    assert edition.edition_notebook(repo_course(), english) == REPO / "notebooks" / "reward_hacking_frontier_zh.ipynb"
    assert not (REPO / "source" / edition.assignment).exists() and not (REPO / "release" / edition.assignment).exists()


@pytest.mark.parametrize("edition", COMPANIONS, ids=lambda e: e.assignment)
def test_every_companion_translation_is_current_and_uses_the_glossary(edition):
    """The same staleness and glossary check as the assignments' (`make release` and `editions status` refuse)."""
    assert editions.problems(repo_course(), edition) == []


def _course_with_notebooks(course):
    """A course copy holds the course's inputs (COURSE_FILES), not notebooks/: add the companion's."""
    import shutil
    shutil.copytree(REPO / "notebooks", course / "notebooks")
    return course


@pytest.mark.parametrize("edition", COMPANIONS, ids=lambda e: e.assignment)
def test_the_generated_companion_edition_is_in_sync(edition, course):
    _course_with_notebooks(course)
    (course / edition.notebook).with_name(f"{edition.assignment}.ipynb").unlink()
    built = editions.build_companions(Course.at(course))
    assert [path.relative_to(course) for path in built] == [edition.edition_notebook(repo_course(), REPO / edition.notebook)
                                                            .relative_to(REPO)]
    committed = REPO / built[0].relative_to(course)
    assert built[0].read_text() == committed.read_text(), f"{committed} is stale: run `make release` and commit"


@pytest.mark.parametrize("edition", COMPANIONS, ids=lambda e: e.assignment)
def test_the_companion_edition_differs_only_in_prose(edition):
    """Same cells and code (but the language line; comments and printed messages may be translated), every
    markdown cell translated and keeping its math and code spans, no outputs (as the English one is committed)."""
    english = notebooks.read(REPO / edition.notebook)
    translated = notebooks.read(edition.edition_notebook(repo_course(), REPO / edition.notebook))
    assert [(c.id, c.cell_type) for c in english.cells] == [(c.id, c.cell_type) for c in translated.cells]
    assert translated.metadata["rlhf_course"]["edition"] == edition.language
    assert "answer_stubs" not in translated.metadata["rlhf_course"]  # no nbgrader here
    for en, zh in zip(english.cells, translated.cells):
        if en.cell_type == "code":
            expected = en.source
            if editions.is_set_up_cell(en):
                # the language first: the cell reads it to open your notebooks of the same edition (rlhf_zh/, ...)
                expected = editions.language_line(edition.language, companion=True) + "\n\n" + en.source
                assert zh.source.startswith("from rlhf_course import i18n; i18n.set_language('zh-CN')  # 本版本的语言：图和打印出的摘要\n")
                assert 'EDITION = {"zh-CN": "_zh"}.get(i18n.language(), "")' in zh.source
            assert editions.code_skeleton(zh.source) == editions.code_skeleton(expected), en.id
            assert not zh.outputs and zh.execution_count is None, en.id
        else:
            assert zh.source != en.source and any("\u4e00" <= ch <= "\u9fff" for ch in zh.source), en.id
            assert spans(zh.source) == spans(en.source), en.id


def test_a_stale_companion_translation_stops_the_release(course):
    """An English edit of the companion notebook without a revisit of its Chinese: `make release` refuses,
    naming the cell, before nbgrader runs; after the revisit it builds again."""
    import nbformat
    _course_with_notebooks(course)
    [edition] = editions.companions(Course.at(course))
    path = course / edition.notebook
    nb = notebooks.read(path)
    cell = next(c for c in nb.cells if c.cell_type == "markdown" and c.id == "38e5d36a")
    cell.source += " A sentence the instructor added."
    nbformat.write(nb, str(path))
    course_handle = Course.at(course)
    with pytest.raises(editions.StaleTranslation, match="cell 38e5d36a: its English changed"):
        release.generate_release(course_handle)
    editions.revisit(edition.path, "38e5d36a", Course.at(course))
    assert editions.problems(Course.at(course), edition) == []
    assert editions.build_companions(Course.at(course)) == [path.with_name("reward_hacking_frontier_zh.ipynb")]


def test_a_glossary_variant_in_the_companion_translation_is_named(course):
    from rlhf_course.grading import editions as module
    _course_with_notebooks(course)
    [edition] = module.companions(Course.at(course))
    table = edition.table()
    table["cells"]["38e5d36a"]["text"] += "每个 nat 都有代价。"
    module.write_table(edition.path, table)
    [found] = module.problems(Course.at(course), edition)
    assert found.startswith("cell 38e5d36a: 'nat' is not the glossary's word for 'nats (unit of information)'"), found
    with pytest.raises(module.StaleTranslation, match="'nat' is not the glossary's word"):
        module.build_companions(Course.at(course))


def test_a_copy_of_the_course_without_notebooks_builds_no_companion(course):
    """The tests' and the classroom's copies hold the course's inputs only: nothing to build, nothing refused."""
    assert not (course / "notebooks").exists()
    assert editions.build_companions(Course.at(course)) == []


# ----------------------------------------------------------------------------- the Chinese prose

COLLOQUIALISMS = ("排对了", "错得多厉害", "在你这里", "之后再没有任何东西")


def chinese_prose_sentences(markdown: str) -> list[str]:
    """The sentences of a markdown cell's running prose (math counted as one character; tables, headings, list
    items and fenced blocks left out), split at 。！？."""
    text = MATH.sub("M", FENCE.sub("", markdown))
    found = []
    for line in text.split("\n"):
        line = line.strip()
        if not line or line.startswith(("|", "#")) or re.match(r"(\d+\.|[*-]) ", line):
            continue
        found += [s.strip() for s in re.split(r"(?<=[。！？])", line) if re.search("[\u4e00-\u9fff]", s)]
    return found


def test_the_chinese_notebooks_read_as_chinese_prose():
    """What a Chinese student reads in the rendered notebooks: no colloquialism, no sentence over 135 characters,
    at most one full-width colon a sentence."""
    paths = sorted(REPO.glob("source/*_zh/*.ipynb")) + sorted(REPO.glob("notebooks/*_zh.ipynb"))
    assert len(paths) == 4
    long, chains = [], []
    for path in paths:
        for cell in notebooks.read(path).cells:
            if cell.cell_type != "markdown":
                continue
            assert not [w for w in COLLOQUIALISMS if w in cell.source], (path.name, cell.id)
            for sentence in chinese_prose_sentences(cell.source):
                if len(sentence) > 135:
                    long.append((path.name, cell.id, len(sentence), sentence[:60]))
                if sentence.count("：") > 1:
                    chains.append((path.name, cell.id, sentence[:60]))
    assert long == [] and chains == [], (long, chains)


# A half-width comma or semicolon beside a Chinese character (in a code cell's comment or message too); a quotation
# (“...”) may hold a sentence that has its own parentheses, and a name shown in italics is JupyterLab's as it reads
# (*Chinese (Simplified, China) - 中文 (简体, 中国)*).
HALF_WIDTH_BESIDE_CHINESE = re.compile(r"[\u4e00-\u9fff][,;]|[,;] *[\u4e00-\u9fff]")
QUOTED = re.compile(r"“[^”]*”")
ITALIC_NAME = re.compile(r"(?<!\*)\*[^*\n]+\*(?!\*)")


def nested_parentheses(text: str) -> list[str]:
    """Each full-width parenthesis opened inside another on the same line, or right after one closed ("）（"),
    quotations set aside, with its context."""
    found = []
    for line in QUOTED.sub("“”", text).split("\n"):
        found += [line[max(at - 30, 0):at + 30] for at in range(len(line)) if line.startswith("）（", at)]
        depth = 0
        for at, character in enumerate(line):
            if character == "（":
                depth += 1
                if depth == 2:
                    found.append(line[max(at - 30, 0):at + 30])
            elif character == "）":
                depth = max(depth - 1, 0)
    return found


def test_the_chinese_text_nests_no_parentheses_and_keeps_full_width_punctuation():
    """Everything a Chinese student reads (the editions' and the companion's cells, messages and details, the answer
    stubs, the package's sentences, the catalogues' misconceptions, README.zh-CN.md): no parenthesis inside another
    or right after one, no half-width comma or semicolon beside a Chinese character (outside code spans and math)."""
    course = repo_course()
    texts = {}
    for edition in COURSE_EDITIONS + COMPANIONS:
        texts.update(editions.edition_texts(edition) + editions.catalogue_texts(course, edition))
    texts.update(editions.readme_texts(course, "zh-CN"))
    assert "README.zh-CN.md" in texts and len(texts) > 300
    nested = [(where, found) for where, text in texts.items() for found in nested_parentheses(text)]
    prose = {where: ITALIC_NAME.sub("*", CODE_SPAN.sub("`", MATH.sub("$", text))) for where, text in texts.items()}
    half_width = [(where, match.group()) for where, text in prose.items()
                  for match in HALF_WIDTH_BESIDE_CHINESE.finditer(text)]
    assert nested == [] and half_width == [], (nested, half_width)


def test_editions_status_names_every_translation_file_of_the_course(course, capsys):
    from rlhf_course.grading import app
    _course_with_notebooks(course)
    assert app.main(["editions", "status", "--course-root", str(course)]) == 0, capsys.readouterr()
    said = capsys.readouterr().out
    assert [line.split(" ")[0] for line in said.splitlines() if not line.startswith(" ")] == sorted(
        path.name for path in (course / editions.I18N_FOLDER).glob("*.json") if not path.name.startswith("glossary."))
