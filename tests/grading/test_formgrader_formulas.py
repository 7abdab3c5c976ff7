"""What a student's text and outputs give the Formgrader's MathJax to typeset (each formula a cost in the
instructor's browser) is bounded: 200 formulas a cell, 1000 a page; the rest of the text is shown as text in a
<pre> (which MathJax skips), with a note.  Rendered in-process with the exporter nbgrader_config.py configures."""
from __future__ import annotations

import re
from pathlib import Path

import nbformat
import pytest
from bs4 import BeautifulSoup

from rlhf_course.grading.pages import safe_html
from rlhf_course.grading.pages.safe_html import MAX_FORMULAS_PER_CELL, MAX_FORMULAS_PER_PAGE
from tests.support.formgrader_render import FORMGRADE_RESOURCES, formgrader_exporter


REPO = Path(__file__).resolve().parents[2]
# MathJax 2's tex2jax as the Formgrader configures it: the delimiters that open or close a formula
DELIMITERS = re.compile(r"\$\$|\$|\\\(|\\\)|\\\[|\\\]|\\begin\{|\\end\{")


def typeset_by_mathjax(element) -> int:
    """Formulas MathJax would find in ``element``'s text, at most: delimiters outside <pre> and <code>, halved."""
    element = BeautifulSoup(str(element), "html.parser")
    for skipped in element.find_all(["pre", "code", "script", "style", "textarea"]):
        skipped.decompose()
    return len(DELIMITERS.findall(element.get_text())) // 2


def formgrader_page(cells):
    nb = nbformat.v4.new_notebook(cells=cells)
    page, _ = formgrader_exporter().from_notebook_node(nb, resources=dict(FORMGRADE_RESOURCES))
    return BeautifulSoup(page, "html.parser")


def answer(text: str):
    cell = nbformat.v4.new_markdown_cell(text)
    cell.metadata["nbgrader"] = {"solution": True, "grade": True, "grade_id": "written", "points": 2,
                                 "locked": False, "schema_version": 3, "task": False}
    return cell


def test_a_written_answer_of_fifteen_thousand_formulas_gives_mathjax_two_hundred():
    """The most formulas one cell can hold within the sanitiser's 64 KiB of HTML."""
    formulas = " ".join(["$x$"] * 15_000 + ["$y_{last}$"])
    soup = formgrader_page([answer("My derivation: " + formulas + " so $\\beta > 0$.")])
    (cell,) = soup.select(".text_cell_render")
    assert typeset_by_mathjax(cell) == MAX_FORMULAS_PER_CELL
    assert f"[formulas after the {MAX_FORMULAS_PER_CELL}th of this cell shown as text, not typeset]" in cell.get_text()
    shown = cell.find("pre").get_text()  # the rest, as text: what the student wrote, in order
    assert shown.startswith("$x$ $x$") and shown.count("$x$") == 15_000 - MAX_FORMULAS_PER_CELL
    assert shown.rstrip().endswith("$y_{last}$ so $\\beta > 0$.")


def test_outputs_of_one_cell_share_its_bound_and_a_markdown_output_counts_once():
    code = nbformat.v4.new_code_cell("for i in range(5): display(HTML(...))")
    hundred = " ".join(f"$y_{{{i}}}$" for i in range(100))
    code.outputs = [nbformat.v4.new_output("display_data", data={"text/markdown": hundred}),
                    *[nbformat.v4.new_output("display_data", data={"text/html": f"<p>{hundred}</p>"})
                      for _ in range(4)]]
    soup = formgrader_page([code])
    outputs = soup.select(".output_area")
    assert [typeset_by_mathjax(output) for output in outputs] == [100, 100, 0, 0, 0]
    assert "of this cell shown as text" in outputs[2].get_text() and "$y_{99}$" in outputs[4].find("pre").get_text()


def test_added_cells_share_the_pages_bound():
    """A student adds cells (the canonical copy keeps them as plain cells): each within the cell's bound, the page
    still gives MathJax at most its own."""
    cells = [nbformat.v4.new_markdown_cell(" ".join(f"$z_{{{c}, {i}}}$" for i in range(150))) for c in range(10)]
    soup = formgrader_page(cells)
    counts = [typeset_by_mathjax(cell) for cell in soup.select(".text_cell_render")]
    assert sum(counts) == MAX_FORMULAS_PER_PAGE and counts[:6] == [150] * 6 and counts[-3:] == [0] * 3
    assert "of this page shown as text" in soup.select(".text_cell_render")[6].get_text()


def test_every_delimiter_counts_and_code_does_not():
    """\\ref and environments are formulas to MathJax too; text in <code> and <pre> is skipped by it."""
    budget = safe_html.FormulaBudget()
    budget.enter(object())
    page = "<p>" + "\\ref{a} " * 150 + "<code>" + "$c$" * 500 + "</code>" + "\\begin{x}\\end{x}" * 100 + "</p>"
    bounded = budget.bounded(page)
    assert typeset_by_mathjax(bounded) <= MAX_FORMULAS_PER_CELL
    assert "\\ref{a} " * 150 + "<code>" + "$c$" * 500 + "</code>" + "\\begin{x}\\end{x}" * 50 in bounded
    assert bounded.count("\\begin{x}") == 100  # the other 50 in the <pre>


def test_a_formula_written_with_character_references_counts():
    """The sanitiser keeps ``&#36;`` in an HTML output as written; the browser gives MathJax a ``$``."""
    code = nbformat.v4.new_code_cell("display(HTML(...))")
    text = " ".join(["&#36;x&#36;", "&dollar;y&dollar;", "&#x5c;(z&#x5C;)"] * 100)
    code.outputs = [nbformat.v4.new_output("display_data", data={"text/html": f"<p>{text}</p>"})]
    (output,) = formgrader_page([code]).select(".output_area")
    assert typeset_by_mathjax(output) == MAX_FORMULAS_PER_CELL and "of this cell shown as text" in output.get_text()


def test_a_latex_output_past_the_bound_is_kept_as_text():
    """nbconvert's template hands a LaTeX output to MathJax as it is: the autograded copy keeps one past the bound
    as plain text."""
    code = nbformat.v4.new_code_cell("display(Latex(...))")
    code.outputs = [nbformat.v4.new_output("display_data", data={"text/latex": "$$a$$", "text/plain": "<Latex>"}),
                    nbformat.v4.new_output("display_data", data={"text/latex": "$b$ " * 300, "text/plain": "<Latex>"})]
    nb = nbformat.v4.new_notebook(cells=[code])
    safe_html.bound_notebook(nb)
    first, second = (output["data"] for output in code.outputs)
    assert first == {"text/latex": "$$a$$", "text/plain": "<Latex>"}
    assert "text/latex" not in second and second["text/plain"].startswith("$b$ $b$")
    assert "[a LaTeX output shown as text, not typeset" in second["text/plain"]


@pytest.mark.parametrize("edition", ["rlhf_zh"])  # the busier edition (270 formulas)
def test_the_released_notebooks_page_is_not_cut(edition):
    """The busiest released notebook (65 cells, 270 formulas, 63 in one cell) keeps every formula."""
    (path,) = (REPO / "release" / edition).glob("*.ipynb")
    soup = formgrader_page(nbformat.read(path, as_version=4).cells)
    assert "shown as text, not typeset" not in soup.get_text()
    assert typeset_by_mathjax(soup.select_one("#notebook-container") or soup) >= 250
