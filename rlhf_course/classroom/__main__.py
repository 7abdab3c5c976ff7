"""``python -m rlhf_course.classroom`` (`make hub`): see :mod:`rlhf_course.classroom.hub`;
``python -m rlhf_course.classroom prestart``: see :mod:`rlhf_course.classroom.prestart`."""
import sys

if sys.argv[1:2] == ["prestart"]:
    from rlhf_course.classroom.prestart import main as prestart
    raise SystemExit(prestart(sys.argv[2:]))

from rlhf_course.classroom.hub import main

main(sys.argv[1:])
