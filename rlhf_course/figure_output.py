"""Showing a figure in a notebook cheaply (issue #37: thirty kernels drawing at once).

A row of panels made by :func:`panels` has its margins fixed in inches, wide enough for the course's tick labels,
axis labels and titles in English and Chinese (tests/test_figure_output.py checks every such figure): no layout
engine runs when it is drawn (constrained layout lays each panel out twice; its cost: bench/RESULTS.md), and
:func:`show` sends it whole, from its one draw, with no tight box to measure or crop.

Any other figure is shown with one draw instead of two:

The inline backend prints each figure with ``bbox_inches="tight"``: matplotlib then lays the figure out and draws
it without rendering to find its tight box, and lays it out and draws it again to render the PNG
(``FigureCanvasBase.print_figure``).  :func:`show` draws once (the layout engine and the rendering, as
``fig.canvas.draw()`` does), measures the same tight box on that drawing (``Figure.get_tightbbox`` on the same
renderer, padded by ``savefig.pad_inches``) and crops the rendered pixels to it, so the student gets the PNG the
inline backend would have sent, at the same size, up to a sub-pixel shift of the whole picture.

Anything else (another backend, another inline format such as SVG or retina, other print options) is shown by
``plt.show()`` as before.

A panel figure whose PNG is already known (an explorer's first figure drawn with the reference's numbers, from the
class's cache: rlhf_course/first_figures.py) is sent as those bytes, its artists built but not rasterised.
"""
from __future__ import annotations

import base64
import io
from typing import Callable

import numpy as np

INLINE_BACKENDS = ("module://matplotlib_inline.backend_inline", "inline")

# A panel row's fixed margins (inches): left of the first panel (its tick labels and y label), right of the last,
# below (tick labels, x label), above (the title), between two panels (the next one's tick labels and y label), and
# what a panel's right-hand axis (``twinx``) adds to its right (its tick labels and label)
LEFT, RIGHT, BOTTOM, TOP, GAP, RIGHT_AXIS = 0.8, 0.15, 0.55, 0.35, 0.95, 0.6
TITLE_LINE = 0.2  # a title's further line
FIXED_MARGINS = "_rlhf_fixed_margins"  # set on a figure made by panels()


def panels(columns: int, figsize: tuple[float, float], right_axis: bool = False, title_lines: int = 1):
    """A figure of ``columns`` panels in a row, ``figsize`` (width, height) in inches, with the margins above:
    ``(figure, axes)``, axes an array of ``columns``.  ``right_axis``: every panel keeps room on its right for a
    second y axis (``ax.twinx()``); ``title_lines``: the panels' titles take that many lines."""
    import matplotlib.pyplot as plt

    width, height = figsize
    extra = RIGHT_AXIS if right_axis else 0.0
    gap = GAP + extra
    panel_width = (width - LEFT - RIGHT - extra - (columns - 1) * gap) / columns
    if panel_width <= 0.5:
        raise ValueError(f"{columns} panels do not fit in a figure {width} inches wide")
    figure, axes = plt.subplots(1, columns, figsize=figsize, squeeze=False, gridspec_kw=dict(
        left=LEFT / width, right=1 - (RIGHT + extra) / width, bottom=BOTTOM / height,
        top=1 - (TOP + TITLE_LINE * (title_lines - 1)) / height,
        wspace=gap / panel_width))
    setattr(figure, FIXED_MARGINS, True)
    return figure, axes[0]


def whole_png(fig) -> bytes:
    """The figure as PNG bytes, drawn once, the whole canvas (a figure with fixed margins needs no crop)."""
    from matplotlib import image

    fig.canvas.draw()
    buffer = io.BytesIO()
    image.imsave(buffer, np.asarray(fig.canvas.buffer_rgba()), format="png", origin="upper", dpi=fig.dpi)
    return buffer.getvalue()


def _inline_png_only(fig) -> bool:
    """Whether ``fig`` would go to an IPython kernel's inline backend as a plain PNG with the default print
    options, closed once shown, with no display metadata (an opaque background)."""
    import matplotlib
    if matplotlib.get_backend() not in INLINE_BACKENDS:
        return False
    from matplotlib_inline.backend_inline import _fetch_figure_metadata
    from matplotlib_inline.config import InlineBackend
    backend = InlineBackend.instance()
    return (set(backend.figure_formats) == {"png"} and backend.print_figure_kwargs == {"bbox_inches": "tight"}
            and backend.close_figures and _fetch_figure_metadata(fig) is None)


def tight_png(fig) -> bytes:
    """The figure as PNG bytes cropped to its tight bounding box (what ``savefig(bbox_inches="tight")`` writes),
    from a single draw.  Pixels of the box beyond the figure's edge (the padding) take the figure's face colour,
    as in ``savefig``."""
    import matplotlib
    from matplotlib import colors, image

    fig.canvas.draw()  # the layout engine runs here, once, then the rendering
    dpi = fig.dpi
    box = fig.get_tightbbox(fig.canvas.get_renderer()).padded(matplotlib.rcParams["savefig.pad_inches"])
    pixels = np.asarray(fig.canvas.buffer_rgba())  # (rows, columns, RGBA), row 0 at the top
    width, height = int(box.width * dpi), int(box.height * dpi)  # as the renderer of a tight savefig sizes it
    # savefig moves the figure by the box's lower-left corner and keeps the bottom ``height`` rows above it
    left = int(round(box.x0 * dpi))
    top = int(round(pixels.shape[0] - box.y0 * dpi - height))
    out = np.empty((height, width, 4), dtype=np.uint8)
    out[:] = np.round(np.array(colors.to_rgba(fig.get_facecolor())) * 255).astype(np.uint8)
    rows = slice(max(top, 0), min(top + height, pixels.shape[0]))
    columns = slice(max(left, 0), min(left + width, pixels.shape[1]))
    out[rows.start - top:rows.stop - top, columns.start - left:columns.stop - left] = pixels[rows, columns]
    buffer = io.BytesIO()
    image.imsave(buffer, out, format="png", origin="upper", dpi=dpi)
    return buffer.getvalue()


def show(fig=None, cached_png: Callable | None = None) -> None:
    """Show ``fig`` (default: the current figure) below the cell and close it: drawn once, whole if
    :func:`panels` made it (:func:`whole_png`), else as the inline backend's ``plt.show()`` would (:func:`tight_png`);
    with any other backend or inline setting, ``plt.show()``.  ``cached_png(fig)``: for a :func:`panels` figure
    shown inline, the bytes :func:`whole_png` would give, if known without drawing (else None: it is drawn)."""
    import matplotlib.pyplot as plt
    if fig is None:
        fig = plt.gcf()
    if not _inline_png_only(fig):
        plt.show()
        return
    from IPython.display import display
    if not fig.axes and not fig.lines:  # IPython prints nothing for an empty figure
        plt.close(fig)
        return
    # base64 text, as IPython's own PNG formatter sends a figure
    whole = getattr(fig, FIXED_MARGINS, False)
    png = cached_png(fig) if whole and cached_png is not None else None
    if png is None:
        png = whole_png(fig) if whole else tight_png(fig)
    data = {"image/png": base64.b64encode(png).decode("ascii"), "text/plain": repr(fig)}
    plt.close(fig)
    display(data, raw=True)
