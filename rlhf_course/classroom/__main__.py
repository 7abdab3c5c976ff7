"""``python -m rlhf_course.classroom`` (`make hub`): see :mod:`rlhf_course.classroom.hub`."""
import sys

from rlhf_course.classroom.hub import main

main(sys.argv[1:])
