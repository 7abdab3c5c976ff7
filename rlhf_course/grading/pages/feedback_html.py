"""The feedback page's HTML exporter: nbconvert's ``lab`` template, sanitised, built once per batch,
with the work it repeats for every student done once.

Every feedback page of a batch renders the same release: the same markdown, the same locked and test
cells.  nbconvert renders, highlights and sanitises each of them again for every page (bleach and
pygments are most of a page's cost), then parses the whole page (most of it the lab theme's CSS) with
BeautifulSoup only to make cells focusable and give images an ``alt`` text.  Here:

* ``markdown2html``, ``highlight_code`` and ``clean_html`` are pure functions of their input (a
  markdown cell with attachments excepted, which is rendered afresh): a bounded cache returns the
  same HTML for the same text, so the release's cells are rendered once per batch.  A cache entry is
  keyed by the exact text, so no page ever receives anything but what its own text renders to.
* The focusable cells get ``tabindex="0"`` by a substitution on the template's own ``<div class=``
  tags; any page with an ``<img>`` (plots) goes through nbconvert's BeautifulSoup pass unchanged.

The page is the one ``HTMLExporter(template_name="feedback", sanitize_html=True)`` writes with the course's
template (``templates/feedback/index.html.j2``: nbconvert's lab page without remote scripts, and the page's whole
look: the scores above the notebook and the Content-Security-Policy ``<meta>``), apart from BeautifulSoup's
re-serialisation of the markup and the sanitiser's allowed tags: nbconvert's ``clean_html`` keeps only bleach's
defaults and a few more, so every heading, paragraph and table header a markdown cell renders to came out as
literal text ("<h2 id=...>Part 1"). :func:`sanitize` is :func:`safe_html.clean`, the course's one allowlist
sanitiser, which keeps those structural tags and images as PNG/JPEG/GIF data; scripts, event handlers, styles,
SVG, iframes and forms stay out.  The policy itself (:func:`content_security_policy`) is made here, from the
template's own inline scripts, and handed to the template.
"""
from __future__ import annotations

import functools
import re
from pathlib import Path

from jinja2 import pass_context
from nbconvert import HTMLExporter
from nbconvert.exporters.templateexporter import TemplateExporter
from nbconvert.filters.highlight import Highlight2HTML
from nbconvert.filters.markdown_mistune import MarkdownWithMath
from nbconvert.filters.widgetsdatatypefilter import WidgetsDataTypeFilter

from rlhf_course.grading.pages import TEMPLATES, safe_html  # TEMPLATES / "feedback": the feedback page's template

_FOCUSABLE = re.compile(r'<div class="(?:jp-Cell-inputWrapper|[^"<>]*\bjp-OutputArea-output\b[^"<>]*)"')
CACHED_TEXT_CHARS = 16_384  # longer texts (a student's big cell) are rendered without caching
CACHE_ENTRIES = 1024


def _cached(function):
    """``function(text, *key)`` memoised for short texts, bounded in entries."""
    cached = functools.lru_cache(maxsize=CACHE_ENTRIES)(function)

    def call(text, *key):
        if isinstance(text, str) and len(text) <= CACHED_TEXT_CHARS:
            return cached(text, *key)
        return function(text, *key)
    return call


def focusable(html: str) -> str:
    """What nbconvert's HTMLExporter does with BeautifulSoup, for a page without images: cell
    inputs and outputs focusable (``tabindex="0"``).  Student markup has been sanitised by then
    (bleach escapes ``<`` in text and ``"`` in attribute values), so only real tags match."""
    return _FOCUSABLE.sub(lambda m: m.group(0) + ' tabindex="0"', html)


sanitize = safe_html.clean  # the one allowlist sanitiser (see :mod:`safe_html`)

_INLINE_SCRIPT = re.compile(r"<script\b([^>]*)>(.*?)</script>", re.DOTALL | re.IGNORECASE)


def content_security_policy(template_page: str) -> str:
    """The page's Content-Security-Policy: no host at all (the math is MathML written with the page),
    script only the template's own inline scripts (by hash, taken from ``template_page``, the template
    rendered for an empty notebook), images only as data, nothing sent anywhere, no frame, object,
    form or <base>."""
    import base64
    import hashlib
    hashes = sorted({"'sha256-" + base64.b64encode(hashlib.sha256(body.encode()).digest()).decode() + "'"
                     for attributes, body in _INLINE_SCRIPT.findall(template_page)
                     if "src=" not in attributes and body.strip()})
    return "; ".join([
        "default-src 'none'",
        "script-src " + (" ".join(hashes) or "'none'"),
        "style-src 'unsafe-inline'",
        "font-src data:",
        "img-src data:",
        "base-uri 'none'",
        "form-action 'none'",
    ])


# A tag (attribute values quoted, as the sanitiser writes them), or a math token in text.
_TAG_OR_MATH_TOKEN = re.compile(r"""(<(?:[^>"']|"[^"]*"|'[^']*')*>)|rlhfmath(\d+)x([0-9a-f]{32})""")


class _MathSlots:
    """Math found in markdown, kept out of the sanitiser's way: the renderer leaves a token (letters
    and digits, which bleach passes as text) and the finished page gets the formula's MathML in its
    place.  The nonce is secret to this exporter, so a token a student types is left as text."""

    def __init__(self):
        import secrets
        self.nonce = secrets.token_hex(16)
        self.formulas: list[tuple[str, bool]] = []
        self.index: dict[tuple[str, bool], int] = {}

    def token(self, latex: str, display: bool) -> str:
        key = (latex, display)
        if key not in self.index:
            self.index[key] = len(self.formulas)
            self.formulas.append(key)
        return f"rlhfmath{self.index[key]}x{self.nonce}"

    def typeset(self, page: str) -> str:
        from rlhf_course.grading.pages.math_html import to_mathml

        def mathml(match):
            if match.group(1):  # a token inside a tag (an image's alt text...) stays as it is
                return match.group(0)
            number = int(match.group(2))
            if match.group(3) != self.nonce or number >= len(self.formulas):
                return match.group(0)
            return to_mathml(*self.formulas[number])
        return _TAG_OR_MATH_TOKEN.sub(mathml, page)


class _MathTokenRenderer(safe_html.markdown_renderer()):  # no fence chooses a lexer
    """HTMLExporter's markdown renderer with the math left as tokens for :meth:`_MathSlots.typeset`."""

    def __init__(self, math_slots: _MathSlots, **options):
        super().__init__(**options)
        self._math_slots = math_slots

    def inline_math(self, body):
        return self._math_slots.token(body, False)

    def block_math(self, body):
        return self._math_slots.token(body, True)

    def latex_environment(self, name, body):
        return self._math_slots.token(f"\\begin{{{name}}}{body}\\end{{{name}}}", True)


class FeedbackExporter(HTMLExporter):
    """The feedback page's exporter: the course's "feedback" template (the page's whole look: the scores
    above the notebook, from ``resources["scores"]``, and the Content-Security-Policy ``<meta>``, from
    ``resources["content_security_policy"]``), with nbconvert's filters cached and its BeautifulSoup pass
    kept for pages with images only."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self._clean_html = _cached(sanitize)
        self._math = _MathSlots()
        self._markdown = _cached(lambda source: self._render_markdown({}, source))
        self._highlighters = {}
        self._policy = None

    def default_filters(self):
        yield from super().default_filters()
        yield ("clean_html", lambda element: self._clean_html(element))
        yield ("markdown2html", self._markdown2html)

    @pass_context
    def _markdown2html(self, context, source):
        safe_html.check_budget()
        cell = context.get("cell", {})
        if cell.get("attachments") or context.get("resources", {}).get("metadata", {}).get("path"):
            return self._render_markdown(context, source)
        return self._markdown(source)

    def _render_markdown(self, context, source):
        # HTMLExporter.markdown2html with the math left as tokens
        cell = context.get("cell", {})
        renderer = _MathTokenRenderer(
            self._math, escape=False, attachments=cell.get("attachments", {}), embed_images=self.embed_images,
            path=context.get("resources", {}).get("metadata", {}).get("path", ""),
            anchor_link_text=self.anchor_link_text, exclude_anchor_links=self.exclude_anchor_links,
            **self.lexer_options)
        return MarkdownWithMath(renderer=renderer).render(safe_html.bounded_markdown(source))

    def _highlighter(self, lexer):
        if lexer not in self._highlighters:
            highlight = Highlight2HTML(pygments_lexer=lexer, parent=self)
            cached = _cached(lambda source: highlight(source, lexer))
            self._highlighters[lexer] = lambda source, language=None, metadata=None: cached(str(source))
        return self._highlighters[lexer]

    def from_notebook_node(self, nb, resources=None, **kw):
        """The page for ``nb``; ``resources["scores"]`` (:func:`rlhf_course.grading.pages.feedback.scores`), when
        given, is shown above the notebook."""
        if self._policy is None:  # the template's own inline scripts, hashed once
            import nbformat
            self._policy = content_security_policy(self._page(nbformat.v4.new_notebook())[0])
        resources = {**(resources or {}), "content_security_policy": self._policy}
        html, resources = self._page(nb, resources, **kw)
        return self._math.typeset(html), resources

    def _page(self, nb, resources=None, **kw):
        # HTMLExporter.from_notebook_node, with a cached highlighter and without BeautifulSoup
        # for pages that have no images.
        # One lexer, the course's: neither the notebook's language_info nor a cell's metadata chooses it.
        self.register_filter("highlight_code", self._highlighter(safe_html.COURSE_LEXER))
        resources = self._init_resources(resources)
        self.register_filter("filter_data_type", WidgetsDataTypeFilter(
            notebook_metadata=self._nb_metadata, parent=self, resources=resources))
        html, resources = TemplateExporter.from_notebook_node(self, nb, resources, **kw)
        if "<img" in html:
            from bs4 import BeautifulSoup
            soup = BeautifulSoup(html, features="html.parser")
            for elem in soup.select("img:not([alt])"):
                elem.attrs["alt"] = "No description has been provided for this image"
            for elem in soup.select(".jp-Notebook div.jp-Cell-inputWrapper"):
                elem.attrs["tabindex"] = "0"
            for elem in soup.select(".jp-Notebook div.jp-OutputArea-output"):
                elem.attrs["tabindex"] = "0"
            return str(soup), resources
        return focusable(html), resources


def make_exporter() -> FeedbackExporter:
    # optimistic_validation: the notebook is validated once after the preprocessors, not after each
    # of them (twelve schema validations a page otherwise).
    return FeedbackExporter(template_name="feedback", extra_template_basedirs=[str(TEMPLATES)],
                            sanitize_html=True, optimistic_validation=True, exclude_anchor_links=True)
