"""LaTeX math typeset when a feedback page is written: MathML, which Chromium and Firefox render
natively, so a page needs no script and no network to show its derivations.

The LaTeX may be a student's, so the MathML is never trusted as text: latex2mathml's output is parsed
as XML and rebuilt element by element from an allowlist of presentation-MathML elements and
attributes (no ``href``, no event handler, no ``style``), its text escaped on the way out.  A formula
that does not convert, does not parse, or holds anything outside the allowlist is shown as its LaTeX
source, escaped, in ``<code class="rlhf-math-source">``.
"""
from __future__ import annotations

import functools
import html
import xml.etree.ElementTree as ElementTree

MATHML = "http://www.w3.org/1998/Math/MathML"
ELEMENTS = frozenset({
    "math", "mrow", "mi", "mn", "mo", "ms", "mtext", "mspace", "msub", "msup", "msubsup", "mfrac", "msqrt",
    "mroot", "mstyle", "merror", "mpadded", "mphantom", "mfenced", "menclose", "munder", "mover",
    "munderover", "mtable", "mtr", "mtd", "mlabeledtr", "semantics", "annotation", "mmultiscripts",
    "mprescripts", "none",
})
ATTRIBUTES = frozenset({
    "display", "mathvariant", "stretchy", "fence", "separator", "lspace", "rspace", "form", "accent",
    "accentunder", "movablelimits", "largeop", "symmetric", "minsize", "maxsize", "linethickness",
    "width", "height", "depth", "columnalign", "rowalign", "columnspacing", "rowspacing", "columnlines",
    "rowlines", "frame", "framespacing", "displaystyle", "scriptlevel", "notation", "open", "close",
    "separators", "encoding", "class", "columnspan", "rowspan",
})
MAX_LATEX_CHARS = 4096  # longer formulas are shown as source (conversion cost grows with length)


class UnsafeMathML(ValueError):
    pass


def _rebuilt(element) -> str:
    tag = element.tag.rpartition("}")[2] if element.tag.startswith("{") else element.tag
    if element.tag.startswith("{") and not element.tag.startswith("{" + MATHML + "}") or tag not in ELEMENTS:
        raise UnsafeMathML(f"element {element.tag!r}")
    attributes = []
    for name, value in element.attrib.items():
        if name not in ATTRIBUTES:
            raise UnsafeMathML(f"attribute {name!r}")
        attributes.append(f' {name}="{html.escape(value, quote=True)}"')
    if tag == "math":
        attributes.insert(0, f' xmlns="{MATHML}"')
    inner = html.escape(element.text or "")
    for child in element:
        inner += _rebuilt(child) + html.escape(child.tail or "")
    return f"<{tag}{''.join(attributes)}>{inner}</{tag}>"


@functools.lru_cache(maxsize=4096)
def to_mathml(latex: str, display: bool) -> str:
    """``latex`` (the text between the delimiters) as safe MathML, or as escaped source if it cannot
    be typeset safely."""
    from latex2mathml.converter import convert
    try:
        if len(latex) > MAX_LATEX_CHARS:
            raise UnsafeMathML("too long")
        tree = ElementTree.fromstring(convert(latex, display="block" if display else "inline"))
        return _rebuilt(tree)
    except Exception:  # noqa: BLE001 - any LaTeX it cannot handle is shown as written
        delimiter = "$$" if display else "$"
        return f'<code class="rlhf-math-source">{html.escape(delimiter + latex + delimiter)}</code>'
