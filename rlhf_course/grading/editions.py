"""Language editions of an assignment: one source, one set of checks, a student release per language.

The instructor edits one assignment (``source/<base>/``).  A translation file beside the course,
``i18n/<base>.<language>.json``, holds the prose of another language, keyed by cell id::

    {"assignment": "rlhf_zh", "base": "rlhf", "language": "zh-CN",
     "cells":    {"<cell id>":  {"english_sha256": "<sha256 of the English text>", "text": "..."}},
     "messages": {"<grade id>": {"english_sha256": "<sha256 of the check's message>", "text": "..."}},
     "details":  {"<a say() template of the checks, in English>": "<the same template translated>"}}

An ungraded companion notebook outside ``source/`` (``notebooks/reward_hacking_frontier.ipynb``) has
its editions the same way: its translation file names it, ``"notebook": "notebooks/<name>.ipynb"``, and
``"assignment"`` is the edition's name, which is also its generated notebook's (``notebooks/<name>_zh.ipynb``,
beside the English one; :func:`companions`).  It has no checks, and no nbgrader release.

A code cell may be in ``cells`` too, for its comments, docstrings and assertion/print messages: its
translation must have the same code once those are set aside (:func:`code_skeleton`), and keep
nbgrader's marker lines.  ``make release`` builds ``source/<assignment>/`` from the two (markdown
cells replaced, code cells identical in code, plus one line in the set-up cell that tells the
package which language to speak), then
nbgrader generates both releases.  Each translated entry stores the hash of the English it was
made from, so an English edit without a revisit of the translation is found (:func:`problems`;
``python -m rlhf_course.grading editions status``) and the release refuses to build.

Grading: an edition is its own nbgrader assignment (the exchange, Validate and feedback work as for
any assignment) graded by its base's checks, with the checks' messages in its language
(:func:`localized_checks`); the export folds the editions into one row per student
(:mod:`rlhf_course.grading.gradebook.export`).
"""
from __future__ import annotations

import ast
import copy
import dataclasses
import hashlib
import json
import re
import shutil
import string
from pathlib import Path

import nbformat

from rlhf_course.course.errors import CourseError
from rlhf_course.grading import instructor
from rlhf_course.course import notebooks
from rlhf_course.course.editions import (I18N_FOLDER, Edition, all_editions, base_of, companions, edition_of, editions,
                                         source_folder)
from rlhf_course.course.settings import Course

# One term per concept: i18n/glossary.<language>.json lists each concept's term and the variants the
# release refuses anywhere in that language's text (glossary_problems).
GLOSSARY_FILE = "glossary.{language}.json"
# The line an edition's set-up cell ends with: it tells the package which language to speak.  Its
# comment is in the edition's language (LANGUAGE_LINE_COMMENT), English for a language not listed.
LANGUAGE_LINE = "from rlhf_course import i18n; i18n.set_language({language!r})  # {comment}"
LANGUAGE_LINE_COMMENT = {"en": "this edition's language: explorers, plots, messages",
                         "zh-CN": "本版本的语言：交互图、其他图和消息"}
# ... and in a companion notebook's edition, which has no sliders and no checks
COMPANION_LANGUAGE_LINE_COMMENT = {"en": "this edition's language: figures and printed summaries",
                                   "zh-CN": "本版本的语言：图和打印出的摘要"}
# nbgrader's answer stubs (ClearSolutions.code_stub / text_stub) in the edition's language, carried in
# the edition's notebook metadata for rlhf_course.grading.nbgrader_ext.EditionAnswerStubs.  The code
# stub differs from nbgrader's only in its comment (tested): it still raises NotImplementedError.
# A written answer's stub names its question ({question}: the cell's grade id), so that Validate, which lists
# the unanswered cells by their text, says which question is still unanswered.
ANSWER_STUBS = {"zh-CN": {"code": "# 在这里写你的代码\nraise NotImplementedError()",
                          "text": "在这里写下你对 {question} 的回答（可以用中文作答）。"}}


def question_stub(stub: str, question: str) -> str:
    """A written answer's stub for one question: ``stub`` with its ``{question}`` filled in, or nbgrader's
    (``YOUR ANSWER HERE``) followed by the question's grade id."""
    return stub.replace("{question}", question) if "{question}" in stub else f"{stub} ({question})"
SET_UP_CELL = "setup"
SOLUTION_MARKERS = ("### BEGIN SOLUTION", "### END SOLUTION")
# nbgrader's marker lines in code cells: a translated code cell keeps them, line for line.
# A hidden test cell's visible header, in the edition's language, made from its check's translated
# message (the English header says the same as the English message).
HIDDEN_TEST_HEADER = {"en": "# Hidden test ({points} {unit}): {message}", "zh-CN": "# 隐藏测试（{points} 分）：{message}"}
CODE_MARKERS = ("### BEGIN SOLUTION", "### END SOLUTION", "### BEGIN HIDDEN TESTS", "### END HIDDEN TESTS")


def english_sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def translatable(cell) -> bool:
    """Prose is translated: every markdown cell.  Code stays the same in every edition."""
    return cell.cell_type == "markdown"


class _BlankProse(ast.NodeTransformer):
    """Blanks the strings a translation may change: docstrings, assertion and raise messages, and
    the string pieces of print's arguments.  Every other constant (a dict key, a grade id passed to
    run_check, a format spec) is code and stays compared."""

    def _blank_strings(self, node):
        for inner in ast.walk(node):
            if isinstance(inner, ast.Constant) and isinstance(inner.value, str):
                inner.value = ""
            elif isinstance(inner, ast.JoinedStr):
                # f"...{x}...": the text pieces are prose, the interpolated expressions are code.
                inner.values = [v for v in inner.values if not isinstance(v, ast.Constant)]
        return node

    def _blank_docstring(self, body):
        if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
                and isinstance(body[0].value.value, str):
            body[0].value.value = ""

    def visit_Module(self, node):
        self._blank_docstring(node.body)
        return self.generic_visit(node)

    def visit_FunctionDef(self, node):
        self._blank_docstring(node.body)
        return self.generic_visit(node)

    visit_AsyncFunctionDef = visit_ClassDef = visit_FunctionDef

    def visit_Assert(self, node):
        self.generic_visit(node)
        if node.msg is not None:
            self._blank_strings(node.msg)
        return node

    def visit_Raise(self, node):
        self.generic_visit(node)
        if isinstance(node.exc, ast.Call):
            for arg in node.exc.args:
                self._blank_strings(arg)
        return node

    def visit_Call(self, node):
        self.generic_visit(node)
        if isinstance(node.func, ast.Name) and node.func.id == "print":
            for arg in node.args:
                self._blank_strings(arg)
        return node


def code_skeleton(source: str) -> str:
    """The code of a cell with comments, docstrings and message strings set aside: two cells with
    the same skeleton differ only in what a translation may change.  IPython lines (%magic, !shell)
    are kept verbatim, as code."""
    tree = ast.parse(_python(source))
    return ast.dump(_BlankProse().visit(tree), annotate_fields=False)


def code_translation_problem(english: str, translation: str) -> str | None:
    """Why a translated code cell may not replace its English (None when it may): it must parse, keep
    nbgrader's marker lines, and differ only in comments, docstrings and message strings."""
    try:
        translated_skeleton = code_skeleton(translation)
    except SyntaxError as error:
        return f"the translation is not valid Python (line {error.lineno}: {error.msg})"
    marker_lines = lambda text: [line.strip() for line in text.splitlines() if line.strip() in CODE_MARKERS]
    if marker_lines(english) != marker_lines(translation):
        return "the translation must keep the ### BEGIN/END SOLUTION and HIDDEN TESTS lines as they are"
    if translated_skeleton != code_skeleton(english):
        english_lines = [ast.unparse(node) for node in _BlankProse().visit(ast.parse(_python(english))).body]
        translated_lines = [ast.unparse(node) for node in _BlankProse().visit(ast.parse(_python(translation))).body]
        first = next((i for i, (a, b) in enumerate(zip(english_lines, translated_lines)) if a != b),
                     min(len(english_lines), len(translated_lines)))
        where = (translated_lines[first].splitlines()[0] if first < len(translated_lines) else "(missing statement)")
        return (f"the translation changes code, not only comments, docstrings or messages "
                f"(statement {first + 1}: {where[:120]!r})")
    return None


def _python(source: str) -> str:
    """The cell as Python: an IPython line (%magic, !shell) becomes a string expression, so a change
    in it still counts as a change of code."""
    return "\n".join(line[:len(line) - len(line.lstrip())] + repr(line.lstrip()) if line.lstrip()[:1] in ("%", "!")
                     else line for line in source.splitlines())


def problems(course: Course, edition: Edition, checks=None) -> list[str]:
    """What keeps the edition from being released: cells or messages untranslated, translated from
    English that has changed since, or named in the file but absent from the source."""
    table = edition.table()
    found = []
    english_notebooks = edition.english_notebooks(course)
    if edition.notebook and not english_notebooks[0].is_file():
        return [f"{edition.notebook}: not found (named by {edition.path.name})"]
    for source_nb_path in english_notebooks:
        nb = notebooks.read(source_nb_path)
        ids = set()
        for cell in nb.cells:
            if cell.cell_type == "code" and cell.id in table["cells"]:
                # A code cell's translation is optional (its comments, docstrings and messages).
                ids.add(cell.id)
                entry = table["cells"][cell.id]
                if entry["english_sha256"] != english_sha256(cell.source):
                    found.append(f"cell {cell.id}: its English changed since it was translated (revisit the "
                                 f"translation, then: python -m rlhf_course.grading editions revisit {edition.path.name} {cell.id})")
                elif (why := code_translation_problem(cell.source, entry.get("text", ""))) is not None:
                    found.append(f"cell {cell.id}: {why}")
                continue
            if not translatable(cell):
                continue
            ids.add(cell.id)
            entry = table["cells"].get(cell.id)
            if entry is None or not entry.get("text", "").strip():
                found.append(f"cell {cell.id}: not translated")
            elif entry["english_sha256"] != english_sha256(cell.source):
                found.append(f"cell {cell.id}: its English changed since it was translated (revisit the "
                             f"translation, then: python -m rlhf_course.grading editions revisit {edition.path.name} {cell.id})")
            elif [m for m in SOLUTION_MARKERS if (m in cell.source) != (m in entry["text"])]:
                found.append(f"cell {cell.id}: the translation must keep the ### BEGIN/END SOLUTION lines")
        found += [f"cell {cid}: in {edition.path.name} but not in {edition.source_description}" for cid in table["cells"]
                  if cid not in ids]
    if checks is not None:
        for check_id, check in checks.items():
            entry = table.get("messages", {}).get(check_id)
            if entry is None or not entry.get("text", "").strip():
                found.append(f"message {check_id}: not translated")
            elif entry["english_sha256"] != english_sha256(check.message):
                found.append(f"message {check_id}: its English changed since it was translated (revisit, then: "
                             f"python -m rlhf_course.grading editions revisit {edition.path.name} {check_id})")
    if not edition.notebook:  # (a companion notebook has no checks)
        found += detail_problems(course, edition, table.get("details", {}))
    found += glossary_problems(course, edition)
    return found


def glossary(course: Course, language: str) -> list[dict]:
    """The language's glossary: [{"english": ..., "term": ..., "variants": [regex, ...]}, ...]; [] without one."""
    path = course.root / I18N_FOLDER / GLOSSARY_FILE.format(language=language)
    return json.loads(path.read_text(encoding="utf-8"))["terms"] if path.is_file() else []


def edition_texts(edition: Edition) -> list[tuple[str, str]]:
    """Every text a student of the edition reads in its language, named: the translated cells, the
    checks' messages and details, and the package's own sentences (rlhf_course/i18n.py) in that language."""
    from rlhf_course import i18n
    table = edition.table()
    texts = [(f"cell {cid}", entry.get("text", "")) for cid, entry in table["cells"].items()]
    texts += [(f"message {gid}", entry.get("text", "")) for gid, entry in table.get("messages", {}).items()]
    texts += [(f"detail {english!r}", text) for english, text in table.get("details", {}).items()]
    texts += [(f"rlhf_course/i18n.py {english!r}", text) for english, text in i18n.TABLES.get(edition.language, {}).items()]
    texts += [(f"answer stub {kind}", text) for kind, text in ANSWER_STUBS.get(edition.language, {}).items()]
    return texts


# The README for the students of a language, beside README.md (which links it from its first line).
README_FILES = {"zh-CN": "README.zh-CN.md"}


def catalogue_texts(course: Course, edition: Edition) -> list[tuple[str, str]]:
    """What the feedback of the edition's students says of a catalogued mistake, in their language: each
    misconception's name, explanation and section (instructor/<base>'s catalogue; [] for a companion notebook)."""
    from rlhf_course.grading import misconceptions
    found = None if edition.notebook else misconceptions.catalogue(course, edition.base)
    if found is None:
        return []
    texts = []
    for name, entry in found[1].items():
        for part in ("name", "explanation", "section"):
            texts.append((f"catalogue {name} ({part})", getattr(entry, part).get(edition.language, "")))
    return texts


def readme_texts(course: Course, language: str) -> list[tuple[str, str]]:
    """The README for the students of ``language``, whole ([] when it has none)."""
    name = README_FILES.get(language)
    path = course.root / name if name else None
    if path is None or not path.is_file():
        return []
    return [(name, path.read_text(encoding="utf-8"))]


def glossary_problems(course: Course, edition: Edition) -> list[str]:
    """Each variant of a glossary term found in the edition's text, its catalogue's texts or the README in its
    language, named by where it is; and each short form used where the edition never defines it."""
    found = []
    texts = edition_texts(edition) + catalogue_texts(course, edition) + readme_texts(course, edition.language)
    file = GLOSSARY_FILE.format(language=edition.language)
    for entry in glossary(course, edition.language):
        for variant in entry["variants"]:
            pattern = re.compile(variant)
            for where, text in texts:
                for match in pattern.finditer(text):
                    context = text[max(match.start() - 12, 0):match.end() + 12].replace("\n", " ")
                    found.append(f"{where}: {match.group()!r} is not the glossary's word for {entry['english']!r}: "
                                 f"write {entry['term']!r} (...{context}...; {file})")
        short, definition = entry.get("short_form"), entry.get("defined_as")
        if short and not any(definition in text for _, text in edition_texts(edition)):
            found += [f"{where}: {short!r}, the short form of {entry['term']!r}, is used but the edition never "
                      f"defines it: write {definition!r} in its term table ({file})"
                      for where, text in texts if short in text.replace(definition, "")]
    return found


def said_templates(course: Course, base: str) -> list[str]:
    """Every template the base's checks module hands to ``say(...)`` (its judges' details and its
    cases' notes, :func:`rlhf_course.grading.checks.phrasebook`), in the order written; [] when the
    course has no such module.  A ``say`` whose first argument is not a literal string is refused:
    its English could not be looked up."""
    path = course.root / instructor.FOLDER / f"{instructor.checks_module_name(base)}.py"
    if not path.is_file():
        return []
    templates = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "say":
            first = node.args[0] if node.args else None
            if not (isinstance(first, ast.Constant) and isinstance(first.value, str)):
                raise ValueError(f"{path.name} line {node.lineno}: say() takes a literal template and its fields "
                                 f"(say(\"... {{x}} ...\", x=...)), not an f-string or a variable")
            templates.append(first.value)
    return list(dict.fromkeys(templates))


def _fields(template: str) -> set[str]:
    return {name for _, name, _, _ in string.Formatter().parse(template) if name}


def detail_problems(course: Course, edition: Edition, details: dict) -> list[str]:
    """The checks' own sentences (``say`` templates, keyed by their English): each translated, with
    the same fields, and none left over from English that is gone."""
    try:
        templates = said_templates(course, edition.base)
    except ValueError as error:
        return [str(error)]
    found = []
    for template in templates:
        text = details.get(template)
        if not text:
            found.append(f"detail {template!r}: not translated (\"details\" in {edition.path.name})")
        elif _fields(text) != _fields(template):
            found.append(f"detail {template!r}: its translation must use the fields {sorted(_fields(template))}, "
                         f"not {sorted(_fields(text))}")
    found += [f"detail {english!r}: in {edition.path.name} but no say() of "
              f"{instructor.checks_module_name(edition.base)}.py uses it (its English changed?)"
              for english in details if english not in templates]
    return found


def is_set_up_cell(cell) -> bool:
    """The code cell that runs first; named by its cell id or, in notebooks whose ids are generated,
    by its nbgrader grade id."""
    return cell.cell_type == "code" and SET_UP_CELL in (cell.id, notebooks.grade_id(cell))


def translate_notebook(nb, edition: Edition):
    """The edition of one source notebook: markdown from the translation, code unchanged except the
    language line appended to the set-up cell; metadata says where it came from."""
    table = edition.table()
    translated = copy.deepcopy(nb)
    set_up = [cell for cell in translated.cells if is_set_up_cell(cell)]
    if len(set_up) != 1:
        # Without the language line the edition would run, and grade, in English without a word.
        raise ValueError(f"{edition.assignment}: the source needs exactly one set-up code cell (cell id or grade id "
                         f"{SET_UP_CELL!r}) to receive the language line; found {len(set_up)}")
    for cell in translated.cells:
        if translatable(cell) or (cell.cell_type == "code" and cell.id in table["cells"]):
            cell.source = table["cells"][cell.id]["text"]
        elif cell.cell_type == "code" and "### BEGIN HIDDEN TESTS" in cell.source:
            cell.source = hidden_test_header(cell, table.get("messages", {}), edition.language)
    line = language_line(edition.language, bool(edition.notebook))
    if edition.notebook:  # a companion's set-up cell reads the language (which of your notebooks): set it first
        set_up[0].source = line + "\n\n" + set_up[0].source
    else:
        set_up[0].source = set_up[0].source.rstrip("\n") + "\n\n" + line
    translated.metadata["rlhf_course"] = {
        "edition": edition.language,
        "generated_from": f"{edition.source_description} + {I18N_FOLDER}/{edition.path.name}",
        "do_not_edit": "make release regenerates this notebook; edit the English source and the translation file"}
    if edition.language in ANSWER_STUBS and not edition.notebook:
        translated.metadata["rlhf_course"]["answer_stubs"] = ANSWER_STUBS[edition.language]
    return translated


def language_line(language: str, companion: bool = False) -> str:
    """The line appended to an edition's set-up cell, its comment in the edition's language (a companion
    notebook's says what it changes there)."""
    comments = COMPANION_LANGUAGE_LINE_COMMENT if companion else LANGUAGE_LINE_COMMENT
    comment = comments.get(language, comments["en"])
    return LANGUAGE_LINE.format(language=language, comment=comment)


def hidden_test_header(cell, messages: dict, language: str) -> str:
    """The hidden test cell with its header comment (the lines before ### BEGIN HIDDEN TESTS) saying
    in the edition's language what it checks: its check's translated message and its points."""
    message = messages.get(notebooks.grade_id(cell), {}).get("text")
    if message is None or language not in HIDDEN_TEST_HEADER:
        return cell.source
    lines = cell.source.splitlines()
    marker = next(i for i, line in enumerate(lines) if line.strip() == "### BEGIN HIDDEN TESTS")
    if not all(line.startswith("#") for line in lines[:marker]):
        return cell.source
    points = cell.metadata.get("nbgrader", {}).get("points", 0)
    header = HIDDEN_TEST_HEADER[language].format(points=f"{points:g}", unit="point" if points == 1 else "points",
                                                 message=" ".join(message.split()))
    return "\n".join([header] + lines[marker:]) + ("\n" if cell.source.endswith("\n") else "")


def write_english_headers(course: Course, base: str, checks: dict) -> list[Path]:
    """source/<base>/: each hidden test cell's header line written from its check's English message, as
    the editions' are from the translated one (so a header never says less than its message).  Returns
    the notebooks it changed."""
    messages = {check_id: {"text": check.message} for check_id, check in checks.items()}
    changed = []
    for path in sorted(source_folder(course, base).glob("*.ipynb")):
        nb = notebooks.read(path)
        edited = False
        for cell in nb.cells:
            if cell.cell_type == "code" and "### BEGIN HIDDEN TESTS" in cell.source:
                source = hidden_test_header(cell, messages, "en")
                if source != cell.source:
                    cell.source, edited = source, True
        if edited:
            nbformat.write(nb, str(path))
            changed.append(path)
    return changed


class StaleTranslation(CourseError, RuntimeError):
    pass


def build_source(course: Course, edition: Edition, checks=None) -> list[Path]:
    """source/<base>/ -> source/<edition>/ (every file copied, notebooks translated).  Refuses, naming
    each cell, when the translation is incomplete or stale."""
    found = problems(course, edition, checks)
    if found:
        raise StaleTranslation(f"{edition.path.name} cannot build {edition.assignment}:\n  " + "\n  ".join(found))
    if edition.notebook:
        return build_companion(course, edition)
    source, target = source_folder(course, edition.base), source_folder(course, edition.assignment)
    if target.exists():
        shutil.rmtree(target)
    target.mkdir(parents=True)
    built = []
    for path in sorted(source.iterdir()):
        if path.suffix == ".ipynb":
            nbformat.write(translate_notebook(notebooks.read(path), edition), str(target / path.name))
            built.append(target / path.name)
        elif path.is_file():
            shutil.copy2(path, target / path.name)
    return built


def build_companion(course: Course, edition: Edition) -> list[Path]:
    """A companion notebook's edition, written beside the English notebook (no outputs, as the English one
    is committed).  :func:`build_source` checks the translation first."""
    [english] = edition.english_notebooks(course)
    target = edition.edition_notebook(course, english)
    nbformat.write(translate_notebook(notebooks.read(english), edition), str(target))
    return [target]


def build_companions(course: Course) -> list[Path]:
    """Every companion notebook's editions, each from its English notebook and translation file (refused,
    naming each cell, when a translation is stale).  A course copy without the English notebook (the tests'
    and the classroom's copies of the course's inputs hold no notebooks/) has none to build."""
    built = []
    for edition in companions(course):
        if edition.english_notebooks(course)[0].is_file():
            built += build_source(course, edition)
    return built


def localized_checks(checks: dict, edition: Edition | None) -> dict:
    """The checks with their messages in the edition's language (the English ones for no edition)."""
    if edition is None:
        return checks
    messages = edition.table().get("messages", {})
    return {cid: dataclasses.replace(check, message=messages[cid]["text"]) if cid in messages else check
            for cid, check in checks.items()}


def revisit(path: Path, entry_id: str, course: Course) -> str:
    """Mark one entry as revisited: store the hash of the current English beside its translation."""
    table = json.loads(path.read_text(encoding="utf-8"))
    edition = Edition(table["assignment"], table["base"], table["language"], path, table.get("notebook"))
    if entry_id in table["cells"]:
        for nb_path in edition.english_notebooks(course):
            for cell in notebooks.read(nb_path).cells:
                if cell.id == entry_id:
                    table["cells"][entry_id]["english_sha256"] = english_sha256(cell.source)
    elif entry_id in table.get("messages", {}):
        checks = instructor.checks_of(course, edition.base)
        table["messages"][entry_id]["english_sha256"] = english_sha256(checks[entry_id].message)
    else:
        raise KeyError(f"{path.name} has no cell or message {entry_id!r}")
    write_table(path, table)
    return entry_id


def write_table(path: Path, table: dict) -> None:
    path.write_text(json.dumps(table, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")


def status(course: Course) -> tuple[int, str]:
    """``editions status``: each translation file (assignments' and companion notebooks'), up to date or what
    to revisit; 1 when any needs revisiting."""
    lines, code = [], 0
    for edition in all_editions(course):
        found = problems(course, edition, None if edition.notebook else instructor.checks_of(course, edition.base))
        lines.append(f"{edition.path.name} ({edition.assignment}): " + ("up to date" if not found else f"{len(found)} to revisit"))
        lines += ["  " + line for line in found]
        code |= bool(found)
    return code, "\n".join(lines)


if __name__ == "__main__":
    raise SystemExit("rlhf_course.grading.editions is not a command: use `python -m rlhf_course.grading editions "
                     "status` or `python -m rlhf_course.grading editions revisit FILE ID [ID ...]`")
