"""The explorers' first figures, cached for a class: thirty kernels need not rasterise the same picture.

When a class presses Run All, every kernel draws the three explorers at the sliders' first values; a student whose
function is right draws the very picture the reference draws, and matplotlib's rendering of it (0.35-0.6 CPU-s
per figure) is most of those cells' cost.  ``python -m rlhf_course.classroom.first_figures FOLDER`` (``make hub``
runs it when the hub starts, as root, into a folder students read and none writes) renders each explorer's first figure
from the reference answers (the source notebooks' solutions), in each edition's language, and writes each PNG
under a key; a kernel finds the folder through ``RLHF_FIRST_FIGURES`` (the hub passes it to every server).

Why every plot is still the student's own function: the explorer always runs the plot function on the student's
function, which computes every number the figure shows and builds every artist, exactly as without the cache.
Only the last step, turning those artists into pixels, may be skipped, and only when the key of the figure just
built (:func:`figure_key`) names a PNG in the folder.  The key is a sha256 over the plot's name, the slider
values, every number the plot function returns and every line's and collection's data in the figure (to
:data:`SIGNIFICANT_DIGITS` significant digits), every text in it, its axes' limits, scales, tick locators and
formatters, the language its labels are in, and what else
the pixels depend on: the figure's size, dpi and canvas, matplotlib's settings (rcParams), the font files its
texts resolve to, the versions of matplotlib, FreeType, numpy, Pillow and zlib, and the source of the modules
that draw and label it.  So a hit means the student's figure holds the same data, text, style and fonts as the
one the PNG was rendered from, its numbers equal to 9 significant digits: the PNG is the one their own figure
renders to (tests/test_first_figures.py renders the reference, and other ways of writing the same functions, and
compares the bytes).  The digits are the one allowance: numbers equal to 9 digits but not in every bit could in
principle move a pixel's anti-aliasing by one level of 255 (numbers 4e-7 apart moved 4 pixels of 432,000 so;
9 digits are 5e-10), never a line, a label or a limit.  Any other difference (another function's numbers, a moved
slider, another style or font) misses and is rendered as before, as is everything without the variable or the
folder.

The folder holds PNGs named by their keys and ``index.json`` (the keys and file names): no code, no numbers,
nothing of the hidden tests.  Only figures that :func:`rlhf_course.figure_output.show` sends whole through the
inline backend as plain PNGs look here: that path exists only with the inline backend's default settings (PNG, the
default print options: ``figure_output._inline_png_only``), and the backend's own rc settings are in rcParams.
"""
from __future__ import annotations

import functools
import hashlib
import json
import os
import platform
import zlib
from pathlib import Path

import numpy as np

VARIABLE = "RLHF_FIRST_FIGURES"  # the folder, in a kernel's environment
INDEX = "index.json"
FORMAT = 2  # of the key and the folder; a change names every figure anew
# Numbers are keyed to 9 significant digits: the same function written another way (softplus for logsigmoid, the
# max of negatives for torch.minimum) differs in its last bits, far below what moves a pixel; 5 of 8 such variants
# hit, 3 with exact bits (tests/test_first_figures.py renders three and compares their PNGs with the cached one)
SIGNIFICANT_DIGITS = 9
# rc settings that choose the backend rather than the picture: a kernel's (the inline backend) and the hub's
# (Agg) differ only in these; the canvas that renders is keyed itself
NOT_PIXELS = ("backend", "backend_fallback", "interactive")


class _Key:
    """A sha256 fed labelled fields, each length-prefixed so that no two sequences of fields collide."""

    def __init__(self):
        self.hash = hashlib.sha256()

    def add(self, label: str, data: bytes | str) -> None:
        data = data.encode() if isinstance(data, str) else data
        for part in (label.encode(), data):
            self.hash.update(len(part).to_bytes(8, "little") + part)


def numbers_text(value, digits: int | None = SIGNIFICANT_DIGITS) -> str:
    """An array or scalar of numbers as text: its shape, then each number to ``digits`` significant digits
    (None: its exact float64 bits, in hex); -0.0 reads as 0."""
    array = np.asarray(value, dtype=np.float64) + 0.0
    if digits is None:
        return f"{array.shape}:{array.tobytes().hex()}"
    return f"{array.shape}:" + ",".join(f"{x:.{digits}g}" for x in array.ravel().tolist())


# The modules whose code decides a figure's pixels: the plots, their labels, the rendering, this key (read, not
# imported: the explorers import this module)
DRAWING_MODULES = ("explorers.py", "figure_output.py", "i18n.py", "first_figures.py")


def _module_sources() -> bytes:
    return b"".join(Path(__file__).with_name(name).read_bytes() for name in DRAWING_MODULES)


@functools.lru_cache(maxsize=1)
def environment_fingerprint() -> str:
    """What renders and encodes a PNG here: library versions, the machine, the drawing modules' source (hashed)."""
    import matplotlib
    import PIL
    from matplotlib import ft2font
    return json.dumps({"matplotlib": matplotlib.__version__, "freetype": ft2font.__freetype_version__,
                       "numpy": np.__version__, "pillow": PIL.__version__, "zlib": zlib.ZLIB_RUNTIME_VERSION,
                       "machine": platform.machine(),
                       "sources": hashlib.sha256(_module_sources()).hexdigest()}, sort_keys=True)


def _font_files(texts: list) -> list[str]:
    """Each font file ``texts`` and the rc settings' default text (the tick labels') resolve to (their fallback
    chains, in order), with its size and time."""
    from matplotlib import font_manager
    properties = {}
    for prop in [text.get_fontproperties() for text in texts] + [font_manager.FontProperties()]:
        properties.setdefault(hash(prop), prop)
    files = []
    for prop in properties.values():
        for path in font_manager.fontManager._find_fonts_by_props(prop):
            stat = os.stat(path)
            files.append(f"{path}:{stat.st_size}:{stat.st_mtime_ns}")
    return sorted(set(files))


def _ticking(axis) -> str:
    """What decides an axis' ticks besides its limits and the rc settings: its scale, its locators and formatters
    (with their values when fixed)."""
    from matplotlib import ticker
    parts = [axis.get_scale()]
    for part in (axis.get_major_locator(), axis.get_minor_locator(), axis.get_major_formatter(),
                 axis.get_minor_formatter()):
        fixed = (list(part.tick_values(0.0, 1.0)) if isinstance(part, ticker.FixedLocator)
                 else part.seq if isinstance(part, ticker.FixedFormatter) else None)
        parts.append(f"{type(part).__module__}.{type(part).__qualname__}:{fixed!r}")
    return " ".join(parts)


def _axes_parts(ax) -> tuple[list, list, list]:
    """An axes' lines, collections and texts, its legend's included, without its axes' tick objects: matplotlib
    makes those only when asked (walking them made the key cost more than the rendering it saves), and what
    they show follows from the limits, :func:`_ticking` and the rc settings, all in the key."""
    legend = ax.get_legend()
    lines = list(ax.lines) + (list(legend.get_lines()) if legend else [])
    texts = [ax.title, ax.xaxis.label, ax.yaxis.label, *ax.texts]
    if legend:
        texts += [*legend.get_texts(), legend.get_title()]
    return lines, list(ax.collections), texts


def figure_key(figure, plot_name: str, sliders: dict, drawn: dict, language: str,
               digits: int | None = SIGNIFICANT_DIGITS) -> str:
    """The hex sha256 that names ``figure``'s PNG (see the module's docstring): ``sliders`` the values the plot
    function was called with, ``drawn`` what it returned (name -> array or number), ``language`` the one its
    labels are in (:func:`rlhf_course.i18n.plot_language`)."""
    import matplotlib

    key = _Key()
    key.add("format", str(FORMAT))
    key.add("plot", plot_name)
    key.add("sliders", json.dumps(sorted((name, repr(value)) for name, value in sliders.items())))
    for name in sorted(drawn):
        key.add(f"drawn {name}", numbers_text(drawn[name], digits))
    all_texts = list(figure.texts)
    for ax in figure.axes:
        key.add("axes", f"{ax.get_position().bounds!r} {ax.get_xlim()!r} {ax.get_ylim()!r} "
                        f"{_ticking(ax.xaxis)} {_ticking(ax.yaxis)}")
        lines, collections, texts = _axes_parts(ax)
        for line in lines:
            key.add("line", numbers_text(line.get_xydata(), digits))
        for collection in collections:
            key.add("collection", numbers_text(collection.get_offsets(), digits))
        key.add("titles", json.dumps([ax.get_title(loc) for loc in ("left", "center", "right")]))
        all_texts += texts
    key.add("texts", json.dumps([text.get_text() for text in all_texts]))
    key.add("language", language)
    key.add("figure", f"{figure.dpi!r} {tuple(figure.get_size_inches())!r} "
                      f"{type(figure.canvas).__module__}.{type(figure.canvas).__qualname__}")
    key.add("rc", json.dumps(sorted((name, repr(value)) for name, value in matplotlib.rcParams.items()
                                    if name not in NOT_PIXELS)))
    key.add("fonts", json.dumps(_font_files(all_texts)))
    key.add("environment", environment_fingerprint())
    return key.hash.hexdigest()


_indexes: dict[str, dict[str, str]] = {}  # folder -> its index, once read (a folder still being made: read again)


def _index(folder: str) -> dict[str, str]:
    if folder not in _indexes:
        try:
            figures = json.loads((Path(folder) / INDEX).read_text())["figures"]
        except (OSError, ValueError, KeyError, TypeError):
            return {}
        _indexes[folder] = figures
    return _indexes[folder]


def cached_png(figure, plot_name: str, sliders: dict, drawn: dict, language: str) -> bytes | None:
    """The PNG of ``figure`` from the folder ``RLHF_FIRST_FIGURES`` names, if its key (:func:`figure_key`) is there;
    else None (and the figure is rendered).  A cache only saves time: anything unexpected here is a miss."""
    folder = os.environ.get(VARIABLE)
    if not folder:
        return None
    try:
        index = _index(folder)
        if not index:
            return None
        name = index.get(figure_key(figure, plot_name, sliders, drawn, language))
        return None if name is None else (Path(folder) / Path(name).name).read_bytes()
    except Exception:  # noqa: BLE001 - a broken cache must never cost the student their figure
        return None
