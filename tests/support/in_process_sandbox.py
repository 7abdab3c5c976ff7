"""A test double of :class:`rlhf_course.grading.sandbox.sandbox.Sandbox` that runs the job in this process.

It has no isolation at all, so it lives in tests only and grades only the submissions the tests
write (reference answers and the catalogue's wrong ones, never hostile code). It goes through the
same steps as the real runner (the runner's own ``define_functions``, the call arguments through
``encode_call``/``decode_call``, the observation through ``to_wire``) so that everything the
trusted grader does around the sandbox (scoring, states, severity, gradebook, feedback pages,
review flags, structure checks) runs without root in a few seconds.

The feedback copy comes back as submitted (not executed): executing a notebook is the real
runner's business and has its own tests.
"""
from __future__ import annotations

import json

from rlhf_course.grading.sandbox.observe import Case, Observation, decode_call, encode_call, observe, to_wire
from rlhf_course.course.limits import Limits
from rlhf_course.grading.sandbox.sandbox import SandboxDied
from rlhf_course import i18n
from rlhf_course.i18n import t
from rlhf_course.grading.sandbox.sandbox_runner import define_functions
from rlhf_course.course.settings import Course


class _Process:
    """What the grader asks of the sandbox's process: whether it still runs."""

    def __init__(self):
        self.returncode = None

    def poll(self):
        return self.returncode


class InProcessSandbox:
    started = 0  # how many "sandboxes" the grader asked for, across instances (tests read it)

    def __init__(self, job: dict, slot: int = 0, limits: Limits = Limits(), deadline: float | None = None,
                 cache_directory=None):
        self.job, self.slot, self.limits, self.cache_directory = job, slot, limits, cache_directory
        self.process: _Process | None = None
        self.namespace: dict | None = None
        self.errors: dict[str, str] = {}
        self._replies: list[bytes] = []  # pipelined calls' replies, oldest first

    @staticmethod
    def unavailable() -> str | None:
        return None  # runs anywhere: no isolation at all

    def start(self) -> "InProcessSandbox":
        type(self).started += 1
        self.process = _Process()
        return self

    def __enter__(self) -> "InProcessSandbox":
        if self.process is None:
            self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.kill()

    def kill(self) -> None:
        if self.process is not None and self.process.returncode is None:
            self.process.returncode = -9

    def log(self) -> str:
        return ""

    def feedback(self) -> bytes:
        return json.dumps(json.loads(self.job["notebook_json"])).encode()

    def define(self) -> dict[str, str]:
        # The set-up cell runs here, in the test process: a language edition's set-up sets the language
        # (its own process in the real sandbox), which must not leak into the tests that follow.
        language = i18n.language()
        try:
            self.namespace, self.errors = define_functions(self.job)
        finally:
            i18n.set_language(language)
        return self.errors

    def send_call(self, request: bytes) -> None:  # the real sandbox's pipelined calls: answered in order
        self._replies.append(self.call(*decode_call(request[1:])))

    def receive_call(self, since: float) -> bytes:
        if self.process is None or self.process.returncode is not None:
            raise SandboxDied("the sandbox is not running", "")
        return self._replies.pop(0)

    def call(self, function: str, args: list, grad_wrt: list) -> bytes:
        if self.process is None or self.process.returncode is not None:
            raise SandboxDied("the sandbox is not running", "")
        name, args, grad_wrt = decode_call(encode_call(function, args, grad_wrt))  # the plain-data path
        target = self.namespace.get(name)
        if not callable(target):
            why = "; ".join(t("cell {cell} raised {error}", cell=k, error=v) for k, v in self.errors.items())
            why = why or t("it is not defined")
            return to_wire(Observation(error=t("{name} is not available ({why})", name=name, why=why),
                                       error_type="NameError"))
        return to_wire(observe(target, Case(tuple(args), tuple(grad_wrt))))


def grade_in_process(course: Course, **kwargs) -> list:
    """``batch.grade_all(course, workers=1, show_progress=False, sandbox=InProcessSandbox, class_reports=False,
    **kwargs)``, restoring this process's torch thread count afterwards (grade_locally sets one thread for its
    judging).  No class report unless asked: its plots cost a second a batch, and tests/grading/test_class_report.py
    is where it is tested."""
    import torch

    from rlhf_course.grading import batch

    threads = torch.get_num_threads()
    try:
        return batch.grade_all(course, **{"workers": 1, "show_progress": False, "sandbox": InProcessSandbox,
                                          "class_reports": False, **kwargs})
    finally:
        torch.set_num_threads(threads)
