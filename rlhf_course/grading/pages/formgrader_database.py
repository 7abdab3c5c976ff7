"""The Formgrader when its gradebook database drops the connection (a PostgreSQL server restarted, a role's
connections ended): it recovers by itself, and says meanwhile what happened.

nbgrader 0.9.6's Formgrader keeps one ``Gradebook`` per server (``settings['nbgrader_gradebook']``); after a
connection error its SQLAlchemy session stays failed (every later request: ``PendingRollbackError``) and its pool
keeps the dead connections, so every page answered a bare HTTP 500 "Error" until the server was restarted.  The
course's server extension (:mod:`formgrader_pages`) gives every Formgrader handler :class:`GradebookRecovery`:

- each request hands its connection back to the pool when it ends, and the gradebook checks a pooled connection
  before lending it (:func:`pings_before_use`: the dialect's ping, a dead connection replaced by a new one), so
  the first request after the database is back works;
- a request that meets a database error rolls the session back and drops the cached gradebook (closing its pool):
  the next request makes a new one;
- the failed request answers HTTP 503 with :func:`not_answering`'s message, as JSON (``{"message": ...}``) to the
  Formgrader's API, as a page to its pages; a grade or comment whose save failed shows so on the grading page
  (``templates/formgrade/course_page.html.j2``).
"""
from __future__ import annotations

import html
import json


def database_errors() -> tuple[type[Exception], ...]:
    """What a request meets when the database dropped its connection or does not answer: the driver's errors
    (SQLAlchemy's ``DBAPIError``: ``OperationalError``, ``InterfaceError``, ...) and a session left failed by one."""
    from sqlalchemy.exc import DBAPIError, PendingRollbackError
    return DBAPIError, PendingRollbackError


def pings_before_use(engine) -> None:
    """Make ``engine``'s pool ping each connection it lends (the dialect's own ping) and replace one that does not
    answer: SQLAlchemy's pessimistic disconnect handling, as ``create_engine(pool_pre_ping=True)`` does, for an
    engine nbgrader's ``Gradebook`` made already."""
    from sqlalchemy import event
    from sqlalchemy.exc import DisconnectionError

    driver_error = engine.dialect.loaded_dbapi.Error

    @event.listens_for(engine, "checkout")
    def ping(dbapi_connection, connection_record, connection_proxy):
        try:
            engine.dialect.do_ping(dbapi_connection)
        except driver_error as exc:  # the pool discards this connection and lends a new one
            raise DisconnectionError(f"a pooled gradebook connection did not answer: {exc}") from exc


def connected_gradebook(db_url: str, course_id: str):
    """nbgrader's ``Gradebook`` of ``db_url`` whose pooled connections are pinged before use."""
    from nbgrader.api import Gradebook
    gradebook = Gradebook(db_url, course_id)
    pings_before_use(gradebook.engine)
    return gradebook


def _reason(error: Exception) -> str:
    """The driver's first line of ``error`` (SQLAlchemy's own text adds the statement and a link)."""
    origin = getattr(error, "orig", None) or error
    lines = [line.strip() for line in str(origin).splitlines() if line.strip()]
    return (lines[0] if lines else type(origin).__name__).rstrip(".")


def not_answering(db_url: str, error: Exception) -> str:
    """What the instructor reads when a request met ``error`` from the gradebook database (its URL without its
    password)."""
    from rlhf_course.course.settings import shown_url
    return (f"The gradebook database ({shown_url(db_url)}) did not answer: {_reason(error)}. "
            f"Nothing was saved by this request; reload when it is back.")


def forget_gradebook(settings: dict, log) -> None:
    """Roll back and close the server's cached gradebook (``settings['nbgrader_gradebook']``, if any), so that the
    next request makes a new one; a rollback or close the dead connection refuses is only logged."""
    gradebook, settings["nbgrader_gradebook"] = settings.get("nbgrader_gradebook"), None
    if gradebook is None:
        return
    for step in (gradebook.db.rollback, gradebook.close):
        try:
            step()
        except database_errors() as exc:
            log.warning("rlhf_course: the gradebook's %s failed: %s", step.__name__, _reason(exc))


class GradebookRecovery:
    """Mixed in ahead of a Formgrader handler (nbgrader's ``BaseHandler``): its gradebook pings before use, and a
    database error drops it and answers 503 with :func:`not_answering`'s message."""

    @property
    def gradebook(self):
        gradebook = self.settings["nbgrader_gradebook"]
        if gradebook is None:
            gradebook = connected_gradebook(self.db_url, self.coursedir.course_id)
            self.settings["nbgrader_gradebook"] = gradebook
        return gradebook

    def on_finish(self):
        """Hand the request's connection back to the pool (nbgrader's session would hold it, and its transaction,
        until the next request), where it is pinged before its next use."""
        gradebook = self.settings.get("nbgrader_gradebook")
        if gradebook is not None:
            try:
                gradebook.db.remove()
            except database_errors() as exc:
                self.log.warning("rlhf_course: the gradebook's session did not close: %s", _reason(exc))
                forget_gradebook(self.settings, self.log)
        super().on_finish()

    def write_error(self, status_code, **kwargs):
        error = kwargs.get("exc_info", (None, None, None))[1]
        if not isinstance(error, database_errors()):
            return super().write_error(status_code, **kwargs)
        forget_gradebook(self.settings, self.log)
        message = not_answering(self.db_url, error)
        self.set_status(503)
        self.clear_header("Content-Type")
        from nbgrader.server_extensions.formgrader.base import BaseApiHandler
        if isinstance(self, BaseApiHandler):
            self.set_header("Content-Type", "application/json; charset=UTF-8")
            return self.finish(json.dumps({"message": message}))
        self.set_header("Content-Type", "text/html; charset=UTF-8")
        return self.finish(f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>Gradebook database not answering"
                           f"</title></head><body><h3>{html.escape(message)}</h3></body></html>")


def recovering(handler_class: type) -> type:
    """``handler_class`` (a Formgrader handler) with :class:`GradebookRecovery` ahead of it."""
    return type(handler_class.__name__, (GradebookRecovery, handler_class), {"__module__": __name__})
