"""The batch's feedback exporter (cached filters, no BeautifulSoup pass for pages without images)
writes the page nbconvert's sanitising lab exporter writes, for hostile notebooks too.  Fast, no root."""
from __future__ import annotations

import base64

import nbformat
import pytest
from bs4 import BeautifulSoup
from nbconvert import HTMLExporter

from rlhf_course import ASSIGNMENT, COURSE_ROOT, NOTEBOOK
from rlhf_course.grading.pages.feedback_html import TEMPLATES, content_security_policy, make_exporter, sanitize
from tests.support.pages import with_policy

PNG = base64.b64encode(bytes.fromhex("89504e470d0a1a0a0000000d4948445200000001000000010806000000"
                                     "1f15c4890000000d49444154789c6360000002000100e221bc330000000049454e44ae426082")).decode()


def _hostile_notebook(with_image: bool):
    nb = nbformat.read(COURSE_ROOT / "release" / ASSIGNMENT / NOTEBOOK, as_version=4)
    v4 = nbformat.v4
    nb.cells.insert(0, v4.new_markdown_cell('# Hi <script>alert(1)</script>\n<img src=x onerror="alert(2)">\n'
                                            '<a href="javascript:alert(3)" title=\'<div class="jp-Cell-inputWrapper"\'>x</a>'))
    code = v4.new_code_cell("display(HTML('<b onclick=\"alert(4)\">bold</b>'))")
    code.outputs = [v4.new_output("display_data", data={"text/html": '<iframe src="https://evil"></iframe><b>ok</b>',
                                                          "text/plain": "x"}),
                    v4.new_output("stream", name="stdout", text='\x1b[31m<div class="jp-OutputArea-output">\x1b[0m'),
                    v4.new_output("error", ename="E", evalue="<script>", traceback=["\x1b[31m<script>x</script>"])]
    if with_image:
        code.outputs.append(v4.new_output("display_data", data={"image/png": PNG, "text/plain": "fig"}))
    nb.cells.insert(1, code)
    nb.cells.insert(2, v4.new_markdown_cell("same text twice"))
    nb.cells.insert(3, v4.new_markdown_cell("same text twice"))
    return nb


@pytest.mark.parametrize("with_image", [False, True])
def test_the_page_is_nbconverts_sanitised_lab_page(with_image):
    # nbconvert's lab page without remote scripts (the course's "feedback" template); the math,
    # which ours typesets as MathML (test_math_*), is left out of this comparison.
    stock = HTMLExporter(template_name="feedback", extra_template_basedirs=[str(TEMPLATES)], sanitize_html=True,
                         exclude_anchor_links=True,  # and the course's one lexer, as the Formgrader's exporter
                         filters={"highlight_code": "rlhf_course.grading.pages.safe_html.CourseHighlight"})
    stock.register_filter("clean_html", sanitize)  # nbconvert's, with rendered Markdown's structural tags
    ours = make_exporter()
    policy = content_security_policy(stock.from_notebook_node(nbformat.v4.new_notebook())[0])
    for _ in range(2):  # the second page is rendered from the caches
        nb = _hostile_notebook(with_image)
        for cell in nb.cells:
            if cell.cell_type == "markdown":
                cell.source = cell.source.replace("$", "")
        expected, _ = stock.from_notebook_node(nb)
        page, _ = ours.from_notebook_node(nb)
        assert str(BeautifulSoup(page, features="html.parser")) == str(
            BeautifulSoup(with_policy(expected, policy), features="html.parser"))
        soup = BeautifulSoup(page, features="html.parser")
        assert not [s for s in soup.find_all("script") if "alert" in s.get_text()] and not soup.find_all("iframe")
        assert not [(t.name, a) for t in soup.find_all(True) for a in t.attrs if a.startswith("on")]
        assert "javascript:" not in str(soup.find_all("a"))
        # the markdown's <img> stays, without its address or handler; the plot's has its data
        assert page.count('alt="No description has been provided for this image"') == 1 + with_image


def test_headings_paragraphs_and_tables_render_as_markup_not_as_text():
    """With nbconvert's own clean_html every heading of the notebook read "<h2 id=...>" on the page."""
    nb = _hostile_notebook(False)
    nb.cells.insert(0, nbformat.v4.new_markdown_cell("## rlhf: 44 / 50\n\nTests: 44 / 44.\n\n| test | points |\n|---|---|\n| `a` | 1 / 1 |"))
    page, _ = make_exporter().from_notebook_node(nb)
    soup = BeautifulSoup(page, features="html.parser")
    assert "&lt;h2" not in page and "&lt;p&gt;" not in page and "&lt;th&gt;" not in page
    assert [h.get_text() for h in soup.find_all("h2")][:2] == ["rlhf: 44 / 50", "Part 1: the PPO clipped objective on token probability ratios"]
    assert soup.find("th").get_text() == "test"
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page  # markup from a student stays text
    assert 'onerror' not in str(soup.find_all("img"))


def test_math_is_mathml_written_with_the_page_and_the_page_asks_no_host():
    nb = nbformat.v4.new_notebook()
    nb.cells.append(nbformat.v4.new_markdown_cell("The ratio $r_t = \\frac{\\pi_\\theta}{\\pi_{old}}$ and\n\n"
                                                  "$$\\mathbb{E}[k_3] = \\mathrm{KL}$$"))
    page, _ = make_exporter().from_notebook_node(nb)
    soup = BeautifulSoup(page, features="html.parser")
    maths = soup.find_all("math")
    assert [m.get("display") for m in maths] == ["inline", "block"] and maths[0].find("mfrac")
    assert "$" not in soup.find(class_="jp-RenderedMarkdown").get_text()
    assert not soup.find_all("script", src=True) and "http" not in soup.find("meta", attrs={"http-equiv": True})["content"]
    assert "rlhfmath" not in page


@pytest.mark.parametrize("latex", [
    "\\href{javascript:alert(1)}{x}",  # latex2mathml writes href on an mrow
    "\\text{<img src=x onerror=alert(1)>}",  # and does not escape \\text
    "\\text{<b>x</b>}",
    '\\text{" onmouseover="alert(1)}',
])
def test_math_from_a_student_cannot_carry_markup(latex):
    nb = nbformat.v4.new_notebook()
    nb.cells.append(nbformat.v4.new_markdown_cell(f"mine: ${latex}$ and ![${latex}$](data:image/png;base64,{PNG})"))
    page, _ = make_exporter().from_notebook_node(nb)
    soup = BeautifulSoup(page, features="html.parser")
    assert not [(t.name, a) for t in soup.find_all(True) for a in t.attrs if a.startswith("on") or a == "href"]
    assert not soup.find_all("b") and [i.get("src", "")[:10] for i in soup.find_all("img")] == ["data:image"]
    assert "javascript:alert" not in str(soup.find_all(True, href=True))


def test_code_cells_are_highlighted_by_the_course_lexer_and_their_text_stays_text():
    """The lab template passed the highlighted code through clean_html, and the sanitiser keeps no class
    (#35): every code cell of every feedback page came out unhighlighted, black on grey."""
    nb = nbformat.read(COURSE_ROOT / "release" / ASSIGNMENT / NOTEBOOK, as_version=4)
    nb.cells.insert(0, nbformat.v4.new_code_cell(
        "import torch\nx = '</pre></div><script>alert(5)</script><img src=x onerror=alert(6)>'"))
    nb.cells[0].metadata["magics_language"] = "maple"
    page, _ = make_exporter().from_notebook_node(nb)
    soup = BeautifulSoup(page, features="html.parser")
    editors = soup.select(".jp-InputArea-editor")
    assert len(editors) == sum(c.cell_type == "code" for c in nb.cells)
    assert all(e.select_one("div.highlight.hl-ipython3") for e in editors)
    first = editors[0]
    assert [s.get_text() for s in first.select("span.kn")] == ["import"] and first.select("span.nn")
    assert "&lt;script&gt;alert(5)&lt;/script&gt;&lt;img src=x onerror=alert(6)&gt;" in str(first)
    assert not [s for s in soup.find_all("script") if "alert" in s.get_text()] and not soup.select("img[onerror]")
