"""The one way anything a student wrote reaches a browser: a student's markdown and rich outputs are
shown only through :func:`clean` (an allowlist sanitiser on bleach), and only within fixed bounds.

Used by the feedback pages (:mod:`feedback_html`), by :func:`bound_notebook` on the autograded copy
trusted grading writes (so any viewer of that file is safe), and by the Formgrader, whose nbconvert
exporter ``nbgrader_config.py`` configures with :class:`SafeMarkdown` and :func:`clean` as its
``markdown2html`` and ``clean_html`` filters (nbgrader's own ``formgrade`` template renders markdown
cells without any sanitiser).

What passes: text, the tags rendered Markdown produces, links to http(s)/mailto/relative addresses,
images as ``data:`` URLs of PNG, JPEG or GIF.  What does not: any ``id``, ``name`` or ``class`` (a
heading's generated anchor included: the page's elements are named by the page alone), script, every event handler and style
attribute, ``javascript:``/``data:text/html`` URLs, SVG and MathML markup, iframe, object, embed,
form, style, link, meta and base.  A disallowed tag is shown escaped, as text, so the instructor sees
what the student tried.

Bounds: bleach (html5lib) is quadratic in the depth of unclosed tags (``'<div>' * 8000``, 40 kB: 3 s;
``'<b>' * 87000``: 44 s), so HTML with more than :data:`MAX_TAGS` tags or :data:`MAX_HTML_CHARS`
characters is never parsed: it is shown as escaped text, cut, with a note saying so.  Each render
step is then a fraction of a second, and :func:`render_budget` stops a page that takes longer than
its budget in total (:class:`RenderBudgetExceeded`) between steps.  In the Formgrader, whose MathJax
typesets in the instructor's browser, a cell gives it at most :data:`MAX_FORMULAS_PER_CELL` formulas
and a page :data:`MAX_FORMULAS_PER_PAGE` (:class:`FormulaBudget`); the rest is shown as text.
"""
from __future__ import annotations

import contextlib
import html
import re
import threading
import time

from rlhf_course.grading.canonical import IMAGE_TYPES, MAX_IMAGE_CHARS, cut_note, is_base64_image, size_text

MAX_TAGS = 1000  # tags in one HTML text that is parsed and sanitised (cost grows with their square)
MAX_HTML_CHARS = 64 * 1024  # characters of one HTML text that is parsed and sanitised
SHOWN_HTML_CHARS = 16 * 1024  # characters of an HTML text too large to render shown as text instead
MAX_TEXT_CHARS = 64 * 1024  # characters of one text output (stream, text/plain, LaTeX, markdown) kept
MAX_MARKDOWN_CHARS = 64 * 1024  # characters of one markdown text rendered
MAX_NOTEBOOK_OUTPUT_CHARS = 4 * 2**20  # all outputs of one notebook together
# Formulas the Formgrader's MathJax is given (each costs the instructor's browser a typesetting): one cell (its
# text and its outputs), one page.  A released notebook's page holds at most 270, its busiest cell 63.
MAX_FORMULAS_PER_CELL = 200
MAX_FORMULAS_PER_PAGE = 1000

# The tags rendered Markdown (and a pandas table) produces: none of them runs code or loads anything
# but an image, whose address is checked below.
TAGS = frozenset({
    "a", "abbr", "acronym", "b", "blockquote", "br", "caption", "code", "col", "colgroup", "dd", "del",
    "details", "div", "dl", "dt", "em", "h1", "h2", "h3", "h4", "h5", "h6", "hr", "i", "img", "ins",
    "kbd", "li", "mark", "ol", "p", "pre", "q", "s", "samp", "small", "span", "strike", "strong", "sub",
    "summary", "sup", "table", "tbody", "td", "tfoot", "th", "thead", "tr", "tt", "u", "ul", "var",
})
PROTOCOLS = frozenset({"http", "https", "mailto", "data"})  # data: only for <img>, see _allowed
IMAGE_DATA = re.compile(r"data:image/(?:png|jpeg|gif);base64,[A-Za-z0-9+/=\s]*\Z", re.IGNORECASE)
# What an output may carry into the autograded copy; the rest (application/javascript, widget views,
# SVG, PDF, JSON...) is dropped with a note.
OUTPUT_TYPES = ("text/plain", "text/html", "text/markdown", "text/latex", *IMAGE_TYPES)


def _allowed(tag: str, name: str, value: str) -> bool:
    # No id, name or class from a student: the page's own scripts find their elements by them (the
    # Formgrader's grade controls by grade id), so markup that could carry one could take a control.
    if name == "title":
        return True
    if tag == "a" and name == "href":
        return not value.strip().lower().startswith("data:")  # bleach already refuses javascript: etc.
    if tag == "img":
        if name == "src":
            return bool(IMAGE_DATA.match(value.strip()))
        return name in ("alt", "width", "height")
    if tag in ("td", "th"):
        return name in ("colspan", "rowspan", "align")
    if tag == "ol":
        return name == "start"
    return False


_cleaner = threading.local()


def _bleach_cleaner():
    if not hasattr(_cleaner, "value"):
        import bleach
        _cleaner.value = bleach.Cleaner(tags=TAGS, attributes=_allowed, protocols=PROTOCOLS, strip=False,
                                        strip_comments=True)
    return _cleaner.value


def clean(element) -> str:
    """``element`` (HTML text) with only what the allowlist keeps; too large or too deep HTML is
    shown as escaped text, cut, with a note.  Counts towards the current :func:`render_budget`."""
    text = element.decode("utf-8", "replace") if isinstance(element, bytes) else str(element)
    check_budget()
    tags = text.count("<")
    if tags > MAX_TAGS or len(text) > MAX_HTML_CHARS:
        kept = text[:SHOWN_HTML_CHARS]
        note = (f"[HTML not rendered: {tags:,} tags and {size_text(len(text))} "
                f"(limit {MAX_TAGS:,} tags, {size_text(MAX_HTML_CHARS)}); shown as text"
                + (f", the first {size_text(len(kept))}]" if len(kept) < len(text) else "]"))
        return f'<p class="rlhf-cut-note"><em>{html.escape(note)}</em></p><pre>{html.escape(kept)}</pre>'
    return _bleach_cleaner().clean(text)


def bounded_markdown(source: str) -> str:
    """Markdown text cut to :data:`MAX_MARKDOWN_CHARS`, with a note when it was cut."""
    source = str(source)
    if len(source) <= MAX_MARKDOWN_CHARS:
        return source
    return source[:MAX_MARKDOWN_CHARS] + "\n\n*" + cut_note("this text", len(source), MAX_MARKDOWN_CHARS) + "*\n"


try:
    from jinja2 import pass_context as _pass_context
except ImportError:  # jinja2 < 3
    from jinja2 import contextfilter as _pass_context

from traitlets.config import LoggingConfigurable  # noqa: E402


class SafeMarkdown(LoggingConfigurable):
    """The ``markdown2html`` filter for nbconvert's HTMLExporter (``c.HTMLExporter.filters``): the
    exporter's own rendering of a bounded text, then :func:`clean`, then (a markdown cell's text) its
    formulas bounded (:class:`FormulaBudget`).  nbconvert registers a filter class as
    ``SafeMarkdown(parent=exporter)``."""

    jinja_pass_arg = getattr(_pass_context(lambda: None), "jinja_pass_arg", None)

    def __call__(self, context, source):
        # HTMLExporter.markdown2html, with the course's renderer (no fence chooses a lexer)
        from nbconvert.exporters.html import HTMLExporter
        from nbconvert.filters.markdown_mistune import MarkdownWithMath
        exporter = self.parent if isinstance(self.parent, HTMLExporter) else HTMLExporter(parent=self)
        check_budget()
        cell = context.get("cell", {})
        renderer = markdown_renderer()(
            escape=False, attachments=cell.get("attachments", {}), embed_images=exporter.embed_images,
            path=context.get("resources", {}).get("metadata", {}).get("path", ""),
            anchor_link_text=exporter.anchor_link_text, exclude_anchor_links=exporter.exclude_anchor_links,
            **exporter.lexer_options)
        page = clean(MarkdownWithMath(renderer=renderer).render(bounded_markdown(source)))
        if "output" in context:  # a markdown output: the clean_html filter after this one bounds its math
            return page
        return _formula_budget(context).bounded(page)


class FormgraderClean(LoggingConfigurable):
    """The Formgrader's ``clean_html`` filter (``c.HTMLExporter.filters``): :func:`clean`, then the formulas
    bounded as :class:`FormulaBudget` says (an HTML output, a markdown output after :class:`SafeMarkdown`)."""

    jinja_pass_arg = getattr(_pass_context(lambda: None), "jinja_pass_arg", None)

    def __call__(self, context, element):
        return _formula_budget(context).bounded(clean(element))


# ----------------------------------------------------------------------------- MathJax's share of a page

# What MathJax 2's tex2jax (the Formgrader's configuration: $, $$, \( \), \[ \], environments, \ref) can take
# as the start or end of a formula.  A formula needs two of these, a \ref or \eqref one (weighed 2), so
# tokens / 2 bounds the formulas of a text whatever its nesting or escapes.
_MATH_TOKEN = re.compile(r"\$\$|\$|\\[()\[\]]|\\(?:begin|end)\{|\\(eq)?ref\{")
_TAG = re.compile(r"""<(/?)([A-Za-z][A-Za-z0-9]*)(?:[^>"']|"[^"]*"|'[^']*')*>""")
_SKIPPED = frozenset({"pre", "code"})  # tex2jax's skipTags that the sanitiser lets through
_LINE_ENDS = re.compile(r"<br\s*/?>|</(?:p|li|h[1-6]|pre|div|tr|blockquote)>", re.IGNORECASE)


def _plain_text_characters(page: str) -> str:
    """``page`` with every character reference in its text written as the character (``&#36;`` is a ``$`` to
    MathJax, and the sanitiser keeps references as written), only ``&``, ``<`` and ``>`` escaped."""
    pieces, position = [], 0
    for tag in _TAG.finditer(page):
        pieces += [html.escape(html.unescape(page[position:tag.start()]), quote=False), tag.group(0)]
        position = tag.end()
    pieces.append(html.escape(html.unescape(page[position:]), quote=False))
    return "".join(pieces)


def _cut_at_formula_tokens(page: str, allowed: int) -> tuple[int | None, int]:
    """(where ``page`` (sanitised HTML) must be cut so that MathJax finds at most ``allowed`` tokens before it,
    or None; the tokens before the cut).  Text in <pre> and <code> is not counted: MathJax skips it."""
    tokens, skipped, position = 0, 0, 0
    for tag in [*_TAG.finditer(page), None]:
        end = tag.start() if tag else len(page)
        if not skipped:
            for token in _MATH_TOKEN.finditer(page, position, end):
                weight = 2 if token.group(0).endswith("ref{") else 1
                if tokens + weight > allowed:
                    return token.start(), tokens
                tokens += weight
        if tag is None:
            break
        position = tag.end()
        if tag.group(2).lower() in _SKIPPED and not tag.group(0).endswith("/>"):
            skipped = max(0, skipped + (-1 if tag.group(1) else 1))
    return None, tokens


class FormulaBudget:
    """What is left of a page's and its current cell's formulas: each text handed to :meth:`bounded` spends
    from both, and a text that would pass either bound is cut where it does; its rest is shown as text in a
    <pre> (which MathJax skips), with a note to the instructor."""

    def __init__(self):
        self.page_tokens = 0
        self.cell, self.cell_tokens = None, 0

    def enter(self, cell) -> None:
        if cell is not self.cell:
            self.cell, self.cell_tokens = cell, 0  # the cell is held: its id is never another cell's

    def cut(self, page: str) -> int | None:
        """Where ``page`` (sanitised HTML) passes a bound (None: it does not); what comes before is spent."""
        cut, tokens = _cut_at_formula_tokens(page, max(0, min(self._left())))
        self.cell_tokens += tokens
        self.page_tokens += tokens
        return cut

    def _left(self) -> tuple[int, int]:
        return 2 * MAX_FORMULAS_PER_CELL - self.cell_tokens, 2 * MAX_FORMULAS_PER_PAGE - self.page_tokens

    def bounded(self, page: str) -> str:
        cell_left, page_left = self._left()
        plain = _plain_text_characters(page)
        cut = self.cut(plain)
        if cut is None:
            return page
        page = plain
        limit, where = (MAX_FORMULAS_PER_CELL, "cell") if cell_left <= page_left else (MAX_FORMULAS_PER_PAGE, "page")
        rest = html.unescape(_TAG.sub("", _LINE_ENDS.sub("\n", page[cut:])))
        note = f"[formulas after the {limit:,}th of this {where} shown as text, not typeset]"
        return (_bleach_cleaner().clean(page[:cut])  # its open tags closed
                + f"<p><em>{html.escape(note)}</em></p><pre>{html.escape(rest)}</pre>")


def _formula_budget(context) -> FormulaBudget:
    """The budget of the page being rendered (its notebook, held, is the page's identity) at its current cell."""
    notebook = context.get("nb")
    state = _formulas.__dict__
    if state.get("notebook") is not notebook or "budget" not in state:
        state["notebook"], state["budget"] = notebook, FormulaBudget()
    state["budget"].enter(context.get("cell"))
    return state["budget"]


_formulas = threading.local()


COURSE_LEXER = "ipython3"  # every notebook of the course is Python; no notebook or cell chooses the lexer
_RENDERER = []


def markdown_renderer():
    """nbconvert's markdown renderer (``IPythonRenderer``) for every page, with one change: a fenced code
    block is shown as plain text whatever its info string says.  nbconvert highlights a fence with the
    Pygments lexer it names ("```maple" picks Maple's, exponential on '"' and repeated '\\a': 0.16 s at 20
    pairs, x3.8 per two more), so a written answer would choose the lexer; and the sanitiser would take
    the highlighting classes off anyway.  A "```mermaid" fence is text too (no diagram script)."""
    if not _RENDERER:
        from mistune import HTMLRenderer
        from nbconvert.filters.markdown_mistune import IPythonRenderer

        class CourseMarkdownRenderer(IPythonRenderer):
            def block_code(self, code: str, info=None) -> str:
                return HTMLRenderer.block_code(self, code)

        _RENDERER.append(CourseMarkdownRenderer)
    return _RENDERER[0]


class CourseHighlight(LoggingConfigurable):
    """The ``highlight_code`` filter of every page (``c.HTMLExporter.filters``): Pygments' IPython 3
    lexer, whatever the notebook's ``language_info`` or a cell's ``magics_language`` says (a student
    could otherwise pick any of Pygments' lexers, some exponential on crafted text)."""

    def __call__(self, source, language=None, metadata=None):
        from nbconvert.filters.highlight import Highlight2HTML
        if not hasattr(self, "_highlight"):
            self._highlight = Highlight2HTML(pygments_lexer=COURSE_LEXER, parent=self)
        check_budget()
        return self._highlight(str(source), COURSE_LEXER)


# ----------------------------------------------------------------------------- the time budget

class RenderBudgetExceeded(Exception):
    def __init__(self, seconds: float):
        super().__init__(f"rendering took more than its budget of {seconds:.1f} s")
        self.seconds = seconds


_budget = threading.local()


@contextlib.contextmanager
def render_budget(seconds: float):
    """Every :func:`clean` and markdown rendering in this thread, within the block, raises
    :class:`RenderBudgetExceeded` once ``seconds`` have passed since the block began."""
    previous = getattr(_budget, "deadline", None)
    _budget.deadline, _budget.seconds = time.monotonic() + seconds, seconds
    try:
        yield
    finally:
        _budget.deadline = previous


def check_budget() -> None:
    deadline = getattr(_budget, "deadline", None)
    if deadline is not None and time.monotonic() > deadline:
        raise RenderBudgetExceeded(_budget.seconds)


# ----------------------------------------------------------------------------- a notebook's outputs

def _cut(text: str, limit: int, what: str) -> str:
    if len(text) <= limit:
        return text
    return text[:limit] + "\n" + cut_note(what, len(text), limit) + "\n"


def _joined(value) -> str:
    return "".join(value) if isinstance(value, list) else str(value)


def bound_output(output, spent: int) -> int:
    """Make one output safe to show anywhere and bounded; returns the characters it keeps.
    ``spent``: what the notebook's earlier outputs kept (all of them: :data:`MAX_NOTEBOOK_OUTPUT_CHARS`)."""
    if "metadata" in output:  # e.g. {"text/html": {"isolated": true}}: an iframe in nbconvert's template
        output["metadata"] = {}
    left = max(0, MAX_NOTEBOOK_OUTPUT_CHARS - spent)
    if output.get("output_type") == "stream":
        output["text"] = _cut(_joined(output.get("text", "")), min(MAX_TEXT_CHARS, left), "this output")
        return len(output["text"])
    if output.get("output_type") == "error":
        trace = [str(line) for line in output.get("traceback", [])]
        total = sum(map(len, trace))
        if total > min(MAX_TEXT_CHARS, left):
            output["traceback"] = [_cut("\n".join(trace), min(MAX_TEXT_CHARS, left), "this traceback")]
        output["evalue"] = _cut(str(output.get("evalue", "")), 2000, "this error message")
        return sum(map(len, output["traceback"])) + len(output["evalue"])
    data = output.get("data")
    if not isinstance(data, dict):
        return 0
    kept, notes = {}, []
    for mime, value in data.items():
        value = _joined(value)
        if mime not in OUTPUT_TYPES:
            notes.append(f"[an output of type {mime} is not shown]")
        elif mime in IMAGE_TYPES:
            if len(value) > min(MAX_IMAGE_CHARS, left) or not is_base64_image(value):
                notes.append(f"[an image of {size_text(len(value))} is not shown "
                             f"(limit {size_text(min(MAX_IMAGE_CHARS, left))}, or not base64)]")
            else:
                kept[mime] = value
        elif mime == "text/html" and len(value) > left:
            notes.append(f"[an HTML output of {size_text(len(value))} is not shown: the notebook's outputs "
                         f"passed {size_text(MAX_NOTEBOOK_OUTPUT_CHARS)} in total]")
        elif mime == "text/html":
            kept[mime] = clean(value)
        else:
            kept[mime] = _cut(value, min(MAX_TEXT_CHARS, left), "this output")
        left = max(0, left - len(kept.get(mime, "")))
    if notes and "text/plain" not in kept:
        kept["text/plain"] = ""
    if notes:
        kept["text/plain"] = (kept["text/plain"] + "\n" if kept["text/plain"] else "") + "\n".join(notes)
    output["data"] = kept
    return sum(len(v) for v in kept.values())


def bound_notebook(nb) -> None:
    """Every output of ``nb`` made safe and bounded (see :func:`bound_output`), markdown attachments
    kept only as PNG/JPEG/GIF, and notebook-level widget state (script in nbconvert's page) dropped.
    The cells' sources (a student's written answers) stay as written: every page renders them
    through :class:`SafeMarkdown`/:func:`clean`."""
    nb.metadata.pop("widgets", None)
    spent = 0
    latex = FormulaBudget()  # text/latex outputs reach MathJax unfiltered (nbconvert's template escapes them)
    for cell in nb.cells:
        latex.enter(cell)
        for output in cell.get("outputs", []):
            spent += bound_output(output, spent)
            _latex_within(output, latex)
        attachments = cell.get("attachments")
        if attachments:
            cell["attachments"] = {
                name: {mime: value for mime, value in bundle.items() if mime in IMAGE_TYPES}
                for name, bundle in attachments.items() if isinstance(bundle, dict)}


def _latex_within(output, budget: FormulaBudget) -> None:
    """A LaTeX output whose formulas would pass the cell's or the notebook's bound (:class:`FormulaBudget`) is
    kept as plain text instead, with a note: no page typesets it."""
    data = output.get("data")
    if not isinstance(data, dict) or not isinstance(data.get("text/latex"), str):
        return
    latex = data["text/latex"]
    if budget.cut(html.escape(latex, quote=False)) is None:
        return
    del data["text/latex"]
    note = f"[a LaTeX output shown as text, not typeset: its formulas passed the bound of {MAX_FORMULAS_PER_CELL:,} " \
           f"a cell, {MAX_FORMULAS_PER_PAGE:,} a notebook]"
    data["text/plain"] = latex + "\n" + note
