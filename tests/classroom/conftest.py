"""Fixtures of the classroom's tests."""
import os
import shutil
import tempfile
from pathlib import Path

import pytest


@pytest.fixture
def socket_base():
    """A classroom's base folder for a root's broker: a short path (a Unix socket's is at most 107 bytes), removed
    after; the brokers are root's, so the test is skipped for anyone else."""
    if os.geteuid() != 0:
        pytest.skip("the hub runs its brokers as root")
    base = Path(tempfile.mkdtemp(prefix="rlhf-broker-base-"))
    yield base
    shutil.rmtree(base, ignore_errors=True)

