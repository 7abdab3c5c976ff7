"""The Formgrader recovers when its gradebook database drops the connection (rlhf_course/grading/pages/
formgrader_database.py): the next request after the database is back works, and meanwhile pages and the API say
what happened (HTTP 503) and save nothing.  nbgrader's own handlers, served by a real tornado server in a thread,
with the course's recovery given by the server extension's function; a SQLite gradebook whose connections are
closed behind SQLAlchemy's back (what a database server ending them looks like to the pool), and a PostgreSQL one
whose backends are ended with pg_terminate_backend when RLHF_TEST_POSTGRES_URL is set."""
from __future__ import annotations

import asyncio
import json
import os
import sqlite3
import threading
import urllib.error
import urllib.request
import warnings
from types import SimpleNamespace
from unittest import mock

import jinja2
import pytest
from jupyter_server.auth.identity import IdentityProvider
from nbgrader.api import Gradebook
from nbgrader.auth import Authenticator
from nbgrader.coursedir import CourseDirectory
from nbgrader.server_extensions.formgrader import apihandlers, handlers
from sqlalchemy import event
from sqlalchemy.exc import SAWarning
from traitlets.config import Config
from tornado import web
from tornado.httpserver import HTTPServer
from tornado.testing import bind_unused_port

from rlhf_course.grading.pages import formgrader_pages
from rlhf_course.grading.pages.formgrader_database import GradebookRecovery

TOKEN = "formgrader-database-test"


def _add_submission(url: str) -> dict:
    """A gradebook of one assignment, one manually graded cell, one submission of ada's; the ids the pages use."""
    with Gradebook(url) as gb:
        gb.add_assignment("a1")
        gb.add_notebook("nb", "a1")
        gb.add_grade_cell("q1", "nb", "a1", max_score=2, cell_type="markdown")
        gb.add_solution_cell("q1", "nb", "a1")
        gb.add_student("ada")
        with warnings.catch_warnings():  # nbgrader's add_submission trips a harmless autoflush warning
            warnings.simplefilter("ignore", SAWarning)
            gb.add_submission("a1", "ada")
        return {"grade": gb.find_grade("q1", "nb", "a1", "ada").id,
                "submission": gb.find_submission_notebook("nb", "a1", "ada").id}


def _manual_score(url: str, grade_id: str):
    with Gradebook(url) as gb:
        return gb.find_grade_by_id(grade_id).manual_score


class Formgrader:
    """nbgrader's Formgrader handlers on ``url``'s gradebook, served on loopback from a thread of their own (the
    gradebook's connections live there); ``recovering``: with the course's recovery, as its server extension
    gives it."""

    def __init__(self, url: str, tmp_path, recovering: bool):
        config = Config()
        config.CourseDirectory.root = str(tmp_path)
        config.CourseDirectory.db_url = url
        coursedir = CourseDirectory(config=config)
        self.settings = {
            "nbgrader_formgrader": SimpleNamespace(coursedir=coursedir, url_prefix="."), "nbgrader_gradebook": None,
            "nbgrader_bad_setup": False, "nbgrader_authenticator": Authenticator(config=config), "base_url": "/",
            "nbgrader_jinja2_env": jinja2.Environment(loader=jinja2.FileSystemLoader([handlers.template_path])),
            "identity_provider": IdentityProvider(token=TOKEN), "cookie_secret": os.urandom(16)}
        self.app = web.Application(handlers.default_handlers + apihandlers.default_handlers, **self.settings)
        self.settings = self.app.settings
        self.wrapped = formgrader_pages._recovering_from_database_errors(self.app.default_router) if recovering else 0
        self.loop = asyncio.new_event_loop()
        started = threading.Event()
        self.thread = threading.Thread(target=self._serve, args=(started,), daemon=True)
        self.thread.start()
        started.wait(10)

    def _serve(self, started):
        asyncio.set_event_loop(self.loop)
        sock, self.port = bind_unused_port()
        self.server = HTTPServer(self.app)
        self.server.add_sockets([sock])
        started.set()
        self.loop.run_forever()

    def call(self, path: str, body: dict | None = None) -> tuple[int, str, str]:
        """The status, content type and body of GET ``path`` (PUT of ``body`` as JSON if given)."""
        request = urllib.request.Request(f"http://127.0.0.1:{self.port}{path}", method="GET" if body is None else "PUT",
                                         data=None if body is None else json.dumps(body).encode(),
                                         headers={"Authorization": f"token {TOKEN}"})
        try:
            with urllib.request.urlopen(request, timeout=30) as answer:
                return answer.status, answer.headers.get("Content-Type", ""), answer.read().decode()
        except urllib.error.HTTPError as error:
            return error.code, error.headers.get("Content-Type", ""), error.read().decode()

    def in_server(self, function):
        """``function()`` run in the server's thread (where its gradebook's connections are), its result."""
        return asyncio.run_coroutine_threadsafe(self._call(function), self.loop).result(30)

    @staticmethod
    async def _call(function):
        return function()

    def close(self):
        def stop():
            self.server.stop()
            gradebook = self.settings.get("nbgrader_gradebook")
            if gradebook is not None:
                gradebook.close()
        self.in_server(stop)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)


@pytest.fixture
def sqlite_gradebook(tmp_path):
    url = f"sqlite:///{tmp_path / 'gradebook.db'}"
    return url, _add_submission(url)


@pytest.fixture
def served(tmp_path):
    started = []

    def serve(url, recovering=True):
        started.append(Formgrader(url, tmp_path, recovering))
        return started[-1]

    yield serve
    for formgrader in started:
        formgrader.close()


def _close_connections_behind_its_back(formgrader: Formgrader) -> int:
    """Close every SQLite connection the server's gradebook opened, as a database server ending them would: the
    pool still holds them (and nbgrader's session one).  How many were closed."""
    def close_all():
        closed = 0
        for connection in formgrader.opened:
            connection.close()
            closed += 1
        return closed
    return formgrader.in_server(close_all)


def _watch_connections(formgrader: Formgrader) -> None:
    """Record each DBAPI connection the server's (current) gradebook engine opens."""
    formgrader.opened = []

    def watch():
        event.listen(formgrader.settings["nbgrader_gradebook"].engine, "connect",
                     lambda dbapi_connection, record: formgrader.opened.append(dbapi_connection))
        # the connection the gradebook opened before this listener: the pool's and the session's
        formgrader.opened.extend({id(c): c for c in _dbapi_connections(formgrader.settings["nbgrader_gradebook"])}
                                 .values())
    formgrader.in_server(watch)


def _dbapi_connections(gradebook):
    """The DBAPI connections in ``gradebook``'s pool now (SQLAlchemy's QueuePool, idle ones) and its session's."""
    pool = gradebook.engine.pool
    found = [record.dbapi_connection for record in list(pool._pool.queue) if record.dbapi_connection is not None]
    session = gradebook.db()
    if session.in_transaction():  # nbgrader's session holds its connection between requests
        found.append(session.connection().connection.dbapi_connection)
    return found


def test_stock_formgrader_answers_500_on_every_page_after_the_connection_dropped(sqlite_gradebook, served):
    """The defect: nbgrader's one gradebook keeps its failed session; every later request fails too."""
    url, ids = sqlite_gradebook
    formgrader = served(url, recovering=False)
    grades = f"/formgrader/api/grades?submission_id={ids['submission']}"
    assert formgrader.call(grades)[0] == 200
    _watch_connections(formgrader)
    assert _close_connections_behind_its_back(formgrader) >= 1
    for _ in range(3):
        status, _, body = formgrader.call(grades)
        assert status == 500 and "did not answer" not in body


def test_the_next_request_after_a_dropped_connection_works(sqlite_gradebook, served):
    url, ids = sqlite_gradebook
    formgrader = served(url)
    assert formgrader.wrapped == len(handlers.default_handlers + apihandlers.default_handlers) - 2  # but 2 static files
    grades = f"/formgrader/api/grades?submission_id={ids['submission']}"
    assert formgrader.call(grades)[0] == 200
    _watch_connections(formgrader)
    assert _close_connections_behind_its_back(formgrader) >= 1
    status, _, body = formgrader.call(grades)
    assert status == 200 and json.loads(body)[0]["id"] == ids["grade"]
    status, _, body = formgrader.call(f"/formgrader/api/grade/{ids['grade']}", {"manual_score": 1.5})
    assert status == 200 and _manual_score(url, ids["grade"]) == 1.5


def test_while_the_database_does_not_answer_the_api_and_pages_say_so_and_save_nothing(sqlite_gradebook, served):
    url, ids = sqlite_gradebook
    formgrader = served(url)
    grade = f"/formgrader/api/grade/{ids['grade']}"
    assert formgrader.call(grade, {"manual_score": 1.0})[0] == 200
    first_gradebook = formgrader.settings["nbgrader_gradebook"]
    _watch_connections(formgrader)
    assert _close_connections_behind_its_back(formgrader) >= 1
    said = (f"The gradebook database ({url}) did not answer: unable to open database file. "
            f"Nothing was saved by this request; reload when it is back.")
    with mock.patch("sqlite3.dbapi2.connect", side_effect=sqlite3.OperationalError("unable to open database file")):
        status, content_type, body = formgrader.call(grade, {"manual_score": 2.0})
        assert (status, json.loads(body)) == (503, {"message": said}) and content_type.startswith("application/json")
        assert formgrader.settings["nbgrader_gradebook"] is None  # dropped: the next request makes a new one
        status, content_type, body = formgrader.call(f"/formgrader/submissions/{ids['submission']}/")
        assert status == 503 and content_type.startswith("text/html") and said in body
    assert _manual_score(url, ids["grade"]) == 1.0  # the failed save saved nothing
    status, _, body = formgrader.call(grade)
    assert status == 200 and json.loads(body)["manual_score"] == 1.0
    assert formgrader.settings["nbgrader_gradebook"] not in (None, first_gradebook)
    assert formgrader.call(grade, {"manual_score": 2.0})[0] == 200 and _manual_score(url, ids["grade"]) == 2.0


def test_a_password_in_the_url_is_not_shown():
    from sqlalchemy.exc import OperationalError

    from rlhf_course.grading.pages.formgrader_database import not_answering
    said = not_answering("postgresql+psycopg2://grader:s3cret@db-host/rlhf",
                         OperationalError("SELECT 1", {}, Exception("connection refused\nIs the server running?")))
    assert "s3cret" not in said and said == (
        "The gradebook database (postgresql+psycopg2://grader:***@db-host/rlhf) did not answer: connection refused. "
        "Nothing was saved by this request; reload when it is back.")


def test_the_extension_gives_every_formgrader_handler_the_recovery():
    from tornado.httputil import HTTPHeaders, HTTPServerRequest, RequestStartLine

    class Server:  # what _load_jupyter_server_extension reads of a Jupyter server with the Formgrader
        jpserver_extensions = {formgrader_pages.FORMGRADER: True}
        web_app = web.Application(handlers.default_handlers + apihandlers.default_handlers, base_url="/")
        config = Config()
        log = mock.Mock()

    formgrader_pages._load_jupyter_server_extension(Server)
    for path in ("/formgrader/api/grade/7", "/formgrader/api/students", "/formgrader/submissions/7/",
                 "/formgrader/manage_assignments", "/formgrader/api/assignment/a1"):
        request = HTTPServerRequest(start_line=RequestStartLine("GET", path, "HTTP/1.1"),
                                    headers=HTTPHeaders(Host="localhost"))
        assert issubclass(Server.web_app.default_router.find_handler(request).handler_class, GradebookRecovery), path


SCHEMA = "formgrader_database_test"  # the test's own tables, apart from any other test's in that database


@pytest.fixture
def postgres_gradebook():
    url = os.environ.get("RLHF_TEST_POSTGRES_URL")
    if not url:
        pytest.skip("RLHF_TEST_POSTGRES_URL is not set (the CI sets it)")
    from sqlalchemy import create_engine, text
    engine = create_engine(url)
    with engine.begin() as connection:
        connection.execute(text(f"DROP SCHEMA IF EXISTS {SCHEMA} CASCADE"))
        connection.execute(text(f"CREATE SCHEMA {SCHEMA}"))
    in_schema = url + ("&" if "?" in url else "?") + f"options=-csearch_path%3D{SCHEMA}"
    yield in_schema, _add_submission(in_schema), engine
    with engine.begin() as connection:
        connection.execute(text(f"DROP SCHEMA IF EXISTS {SCHEMA} CASCADE"))
    engine.dispose()


def test_after_pg_terminate_backend_the_next_request_works(postgres_gradebook, served):
    from sqlalchemy import text
    url, ids, engine = postgres_gradebook
    formgrader = served(url)
    grade = f"/formgrader/api/grade/{ids['grade']}"
    assert formgrader.call(grade)[0] == 200
    backends = formgrader.in_server(
        lambda: sorted({c.get_backend_pid() for c in _dbapi_connections(formgrader.settings["nbgrader_gradebook"])}))
    with engine.connect() as other:
        for pid in backends:
            assert other.execute(text("SELECT pg_terminate_backend(:pid)"), {"pid": pid}).scalar()
    status, _, body = formgrader.call(grade, {"manual_score": 1.5})
    assert status == 200 and json.loads(body)["manual_score"] == 1.5 and _manual_score(url, ids["grade"]) == 1.5
