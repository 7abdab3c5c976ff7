"""A long-lived child process that renders pages, killed when a page overruns its budget.

A page is rendered from what a student wrote: :mod:`safe_html` bounds each step and stops a page between
steps once its budget is spent, but a step that never returns (a catastrophic case in a parser we do not
own) would hold the caller for good.  So the caller never renders: it sends the work to this process and
waits at most the page's budget (plus :data:`KILL_GRACE`, the time the child's own budget needs to stop it
cleanly); past that, the child is killed and the caller gets ``None`` and says so.  The next page starts
a fresh child, forked from a forkserver that has the renderers' modules loaded (a fraction of a second).

One child serves every page of a batch in turn, so the exporter's templates and bleach's tables are built
once and stay warm.  The Formgrader's pages (:mod:`formgrader_pages`) use the same forkserver.
"""
from __future__ import annotations

import importlib
import multiprocessing

KILL_GRACE = 1.0  # seconds past a page's budget before its process is killed
PRELOAD = ("nbconvert", "bleach", "nbformat", "rlhf_course.grading.pages.safe_html", "rlhf_course.grading.pages.feedback",
           "rlhf_course.grading.pages.feedback_html", "rlhf_course.grading.pages.formgrader_pages")
_CONTEXT = None


def context():
    """The forkserver context every page process is forked from: it starts a fresh interpreter (none of
    the grader's threads or torch) that has loaded :data:`PRELOAD` once."""
    global _CONTEXT
    if _CONTEXT is None:
        _CONTEXT = multiprocessing.get_context("forkserver")
        _CONTEXT.set_forkserver_preload(list(PRELOAD))
    return _CONTEXT


def _resolve(target: str):
    module, _, name = target.partition(":")
    return getattr(importlib.import_module(module), name)


def _serve(connection, target: str, warm_up: str | None) -> None:
    """In the child: run ``warm_up`` and say so, then call ``target`` with each tuple of arguments
    received and send back what it returned."""
    function = _resolve(target)
    if warm_up:
        _resolve(warm_up)()
    connection.send(("ready", None))
    while True:
        try:
            args = connection.recv()
        except (EOFError, OSError):
            return
        try:
            reply = ("ok", function(*args))
        except Exception as exc:  # reported to the caller, which decides; the child serves on
            reply = ("error", f"{type(exc).__name__}: {exc}")
        connection.send(reply)


class PageProcessError(RuntimeError):
    """The page process raised: its message is the exception's type and text."""


class PageProcess:
    """Calls ``target`` ("module:function") in a child process, each call bounded in time.  ``warm_up``
    ("module:function", no arguments) runs once in each new child before any call is timed: what every
    page needs built (an exporter) is not charged to the first page's budget."""

    START_SECONDS = 120.0  # a new child's start and warm-up, on a machine as loaded as it may be

    def __init__(self, target: str, warm_up: str | None = None):
        self.target, self.warm_up = target, warm_up
        self._child = None
        self._connection = None
        self.kills = 0  # children killed over their budget (reported by benches and tests)

    def _start(self) -> None:
        ctx = context()
        self._connection, theirs = ctx.Pipe(duplex=True)
        self._child = ctx.Process(target=_serve, args=(theirs, self.target, self.warm_up), daemon=True,
                                  name="page renderer")
        self._child.start()
        theirs.close()
        try:
            ready = self._connection.poll(self.START_SECONDS) and self._connection.recv() == ("ready", None)
        except (EOFError, OSError):
            ready = False
        if not ready:
            self.close()
            raise PageProcessError(f"the page process did not start within {self.START_SECONDS:g} s")

    def call(self, args: tuple, seconds: float):
        """What ``target(*args)`` returned, or None when it took more than ``seconds`` (the child is then
        killed; the next call starts another).  Raises :class:`PageProcessError` if ``target`` raised."""
        for attempt in (1, 2):  # a child that died between calls is replaced once
            if self._child is None or not self._child.is_alive():
                self.close()
                self._start()
            try:
                self._connection.send(args)
                break
            except (BrokenPipeError, ConnectionResetError, EOFError, OSError):
                self.close()
                if attempt == 2:
                    raise
        try:
            if not self._connection.poll(seconds):
                self.kills += 1
                self.close()
                return None
            kind, value = self._connection.recv()
        except (EOFError, OSError):  # the child died mid-page (e.g. out of memory)
            self.close()
            return None
        if kind == "error":
            raise PageProcessError(value)
        return value

    def close(self) -> None:
        if self._connection is not None:
            self._connection.close()
            self._connection = None
        if self._child is not None:
            if self._child.is_alive():
                self._child.kill()
            self._child.join(5)
            self._child = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
