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
its budget in total (:class:`RenderBudgetExceeded`) between steps.
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
    exporter's own rendering of a bounded text, then :func:`clean`.  nbconvert registers a filter
    class as ``SafeMarkdown(parent=exporter)``."""

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
        return clean(MarkdownWithMath(renderer=renderer).render(bounded_markdown(source)))


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
    for cell in nb.cells:
        for output in cell.get("outputs", []):
            spent += bound_output(output, spent)
        attachments = cell.get("attachments")
        if attachments:
            cell["attachments"] = {
                name: {mime: value for mime, value in bundle.items() if mime in IMAGE_TYPES}
                for name, bundle in attachments.items() if isinstance(bundle, dict)}
