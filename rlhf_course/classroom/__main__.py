"""``python -m rlhf_course.classroom`` and the console script ``rlhf-classroom`` (pyproject.toml), :func:`main`:
`make hub` (:mod:`rlhf_course.classroom.hub`), or with ``prestart`` first, :mod:`rlhf_course.classroom.prestart`,
with ``remove`` first, the removal of a classroom kept after an unplanned stop (:func:`~rlhf_course.classroom.hub.remove_main`)."""
import sys


def main(argv: list[str] | None = None) -> int:
    """Run the classroom (or ``prestart``) with ``argv`` (default: the command line's); its exit code."""
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["prestart"]:
        from rlhf_course.classroom.prestart import main as prestart
        return prestart(argv[1:])
    if argv[:1] == ["remove"]:
        from rlhf_course.classroom.hub import remove_main
        return remove_main(argv[1:])
    from rlhf_course.classroom.hub import main as hub
    hub(argv)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
