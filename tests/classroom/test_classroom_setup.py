"""Fast checks of make hub's pieces (no root, no browser): the per-account password table, and the
classroom never deleting a folder it did not make."""
import asyncio
import concurrent.futures
import os
import sys
from pathlib import Path

import pytest

from rlhf_course.classroom.auth import PasswordTableAuthenticator
from rlhf_course.classroom.hub import MARKER, Classroom


def login(authenticator, name, password):
    # In a thread of its own: a Playwright session of another test may hold this thread's event loop.
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, authenticator.authenticate(None, {"username": name, "password": password})).result()


def test_each_account_logs_in_with_its_own_password_only():
    auth = PasswordTableAuthenticator(passwords={"ann": "s3cret-ann", "ben": "s3cret-ben"})
    assert login(auth, "ann", "s3cret-ann") == "ann"
    assert login(auth, "ben", "s3cret-ben") == "ben"
    assert login(auth, "ann", "s3cret-ben") is None  # another account's password
    assert login(auth, "ann", "") is None
    assert login(auth, "ann", "s3cret-ann ") is None
    assert login(auth, "carl", "s3cret-ann") is None  # no such account
    assert login(auth, "", "") is None
    assert login(PasswordTableAuthenticator(), "ann", "") is None  # an empty table lets nobody in


def test_a_folder_the_classroom_did_not_make_is_never_removed(tmp_path, repo):
    if os.geteuid() != 0:
        pytest.skip("the classroom checks for root first")
    base = tmp_path / "precious"
    base.mkdir()
    (base / "thesis.tex").write_text("years of work")
    classroom = Classroom(repo, base, "rlhfnever_", ["ann"], 8000, Path(sys.executable))
    with pytest.raises(SystemExit, match="is not a classroom folder"):
        classroom.create()
    classroom.remove()
    assert (base / "thesis.tex").read_text() == "years of work"
    assert not (base / MARKER).exists()
