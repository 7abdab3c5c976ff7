"""``python -m rlhf_course.grading`` and the console script ``rlhf-grader`` (pyproject.toml): :func:`main`."""
import sys

# The grader's start-up, once for every command: nbformat imports jsonschema, which, when rfc3987_syntax is
# installed (jupyter_events asks for it), builds a Lark grammar for RFC 3987 IRIs at import, a large part of the
# grader's start-up (bench/RESULTS.md).  Nothing the grader validates uses the "iri" formats; without the module
# jsonschema simply does not check them.  Here, before anything imports nbformat, and only in the grader's own
# process (never in a notebook's kernel or a Jupyter server): the console script imports this module too.
sys.modules.setdefault("rfc3987_syntax", None)  # type: ignore[assignment]

from rlhf_course.grading.app import main  # noqa: E402

if __name__ == "__main__":
    raise SystemExit(main())
