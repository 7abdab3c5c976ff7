"""The course's grading, on nbgrader: ``python -m rlhf_course.grading COMMAND`` (:mod:`app`), nine commands:
``release``, ``grade``, ``report``, ``export``, ``examples``, ``editions {status,revisit}``, ``extend``,
``publish-deadlines``, ``lab-release``.

Imports run one way, top to bottom (pyproject.toml's import contracts say so, and the tests check them):

* the commands: ``app`` -> ``examples``;
* the engine: ``batch`` grades a class, ``trusted`` one submission (``intake``, then the sandbox, judged by
  ``checks``); ``release``/``generate`` make the student version, ``deadlines`` the extensions, ``nbgrader_ext``
  plugs into nbgrader;
* two wings that write what people read: ``pages/`` (the feedback page, the class report, the Formgrader's pages,
  and every template) above ``gradebook/`` (the gradebook, grades.csv, the LMS's CSV, grading_report.csv, the late
  penalty);
* the words they share: ``results`` (what grading produces, no torch), ``checks``, ``misconceptions`` (and
  ``catalogue``, what the instructor's catalogues of answers are written with),
  ``editions``, ``canonical``, ``instructor``;
* the ``sandbox/`` wing, which imports nothing of the rest;

and below grading the course model (:mod:`rlhf_course.course`: ``Course``, limits, due dates, editions, notebooks).
"""
