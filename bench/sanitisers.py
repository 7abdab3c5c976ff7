"""bleach against nh3 on the course's own pages: milliseconds of sanitising per page, each with the course's allowlist.

    python bench/sanitisers.py [--repeat 5]      (nh3 is not a course dependency: `pip install nh3` to compare)

The pages are the Formgrader's grading pages of the six released notebooks (rendered by nbgrader's exporter as
nbgrader_config.py configures it; every HTML text it hands to ``safe_html.clean`` is recorded) and the slowest page
the bounds allow (60 markdown cells of 64 KiB, each just under ``MAX_TAGS`` unclosed tags).  Each sanitiser then
cleans each page's recorded texts ``repeat`` times; the median is printed, with the whole page's render time (bleach
inside) beside it.  nh3 is given the same tags, attributes, URL schemes and attribute check
(``safe_html._allowed``); it strips a disallowed tag where bleach shows it escaped, so its output differs by design.
"""
from __future__ import annotations

import argparse
import copy
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from rlhf_course.course import notebooks  # noqa: E402
from rlhf_course.course.settings import course_config  # noqa: E402
from rlhf_course.grading.pages import safe_html  # noqa: E402

FORMGRADE_RESOURCES = {"assignment_id": "a", "notebook_id": "n", "submission_id": "s", "index": 0, "total": 1,
                       "base_url": "", "student": "s", "last_name": "", "first_name": "", "notebook_path": "n.ipynb"}
NH3_ATTRIBUTES = {"*": {"title"}, "a": {"href"}, "img": {"src", "alt", "width", "height"},
                  "td": {"colspan", "rowspan", "align"}, "th": {"colspan", "rowspan", "align"}, "ol": {"start"}}


def exporter():
    """nbconvert's HTMLExporter as nbgrader's Formgrader builds it from the course's nbgrader_config.py."""
    from nbconvert import HTMLExporter
    config = course_config(REPO)
    config.HTMLExporter.template_name = "formgrade"
    return HTMLExporter(config=config)


def slowest_page(release):
    """The release with 60 markdown cells of 64 KiB added, each just under the sanitiser's tag limit."""
    import nbformat
    nb = copy.deepcopy(release)
    nb.cells += [nbformat.v4.new_markdown_cell("<div>" * (safe_html.MAX_TAGS - 10) + "x" * 60_000)
                 for _ in range(60)]
    return nb


def pages() -> dict:
    """Page name -> notebook: the six releases and the slowest page."""
    found = {path.parent.name: notebooks.read(path) for path in sorted((REPO / "release").glob("*/*.ipynb"))}
    found["slowest page (rlhf)"] = slowest_page(found["rlhf"])
    return found


def recorded_texts(nb) -> tuple[list[str], float]:
    """Every HTML text the page's render sanitises, and the render's seconds (with bleach)."""
    texts: list[str] = []
    clean = safe_html.clean

    def recording(element):
        texts.append(element.decode("utf-8", "replace") if isinstance(element, bytes) else str(element))
        return clean(element)
    safe_html.clean = recording
    try:
        start = time.perf_counter()
        exporter().from_notebook_node(nb, resources=dict(FORMGRADE_RESOURCES))
        return texts, time.perf_counter() - start
    finally:
        safe_html.clean = clean


def nh3_cleaner():
    import nh3
    return nh3.Cleaner(tags=set(safe_html.TAGS), attributes=NH3_ATTRIBUTES, url_schemes=set(safe_html.PROTOCOLS),
                       attribute_filter=lambda tag, name, value: value if safe_html._allowed(tag, name, value)
                       else None, link_rel=None, strip_comments=True)


def seconds_to_clean(clean, texts: list[str], repeat: int) -> float:
    """Median seconds ``clean`` takes over all ``texts`` (the texts the page would sanitise: the size bounds apply)."""
    parsed = [t for t in texts if t.count("<") <= safe_html.MAX_TAGS and len(t) <= safe_html.MAX_HTML_CHARS]
    runs = []
    for _ in range(repeat):
        start = time.perf_counter()
        for text in parsed:
            clean(text)
        runs.append(time.perf_counter() - start)
    return statistics.median(runs)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    bleach_clean = safe_html._bleach_cleaner().clean
    try:
        nh3_clean = nh3_cleaner().clean
    except ImportError:
        print("nh3 is not installed (pip install nh3): bleach alone", file=sys.stderr)
        nh3_clean = None
    print(f"{'page':<22} {'texts':>6} {'KiB':>7} {'page render s':>14} {'bleach ms':>10} {'nh3 ms':>8}")
    for name, nb in pages().items():
        texts, render = recorded_texts(nb)
        bleach_ms = 1000 * seconds_to_clean(bleach_clean, texts, args.repeat)
        nh3_ms = 1000 * seconds_to_clean(nh3_clean, texts, args.repeat) if nh3_clean else float("nan")
        print(f"{name:<22} {len(texts):>6} {sum(map(len, texts)) / 1024:>7.0f} {render:>14.2f} "
              f"{bleach_ms:>10.1f} {nh3_ms:>8.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
