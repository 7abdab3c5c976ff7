"""The simulated server's shared packages (rlhf_course/classroom/server_env.py) are a copy of the checkout's venv, in
seconds, not pip's install of the whole requirements list (a minute or two of CPU on every fresh machine, CI's
included): checked in the test runner's own process, whose ``sys.path`` also holds setuptools' vendored packages
(other versions of packaging, zipp, platformdirs), as the exchange and hub tests build the base there."""
import subprocess
import sys
from pathlib import Path

import pytest

from rlhf_course.classroom import server_env


def test_this_venvs_packages_are_copied_not_installed_again(tmp_path, repo):
    if sys.prefix == sys.base_prefix:
        pytest.skip("not run from a venv: the base is pip's to install")
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    assert server_env.copy_pinned_packages(repo, venv)
    site = Path(server_env._site_packages(venv))
    for package in ("torch", "nbgrader", "jupyterlab"):  # the same files, linked (one file system here) or copied
        assert (site / package / "__init__.py").is_file()
    assert not list(site.glob("__editable__*"))  # this checkout's editable install stays out


def test_the_pins_are_checked_against_this_venvs_site_packages_only(repo):
    installed = server_env._installed_here()
    pins = server_env.pinned_versions(repo / "requirements.txt")
    vendored_elsewhere = [name for name in ("packaging", "zipp", "platformdirs") if name in pins]
    assert vendored_elsewhere and all(installed[name] == pins[name] for name in vendored_elsewhere)


def test_console_scripts_run_the_copys_python_whichever_path_named_the_venv(tmp_path):
    """A worktree's .venv linked to the main checkout's: sys.prefix names the link, the scripts' #! the target."""
    real = tmp_path / "main" / ".venv"
    (real / "bin").mkdir(parents=True)
    (real / "bin" / "python").symlink_to(sys.executable)
    link = tmp_path / "worktree-venv"
    link.symlink_to(real)
    copy = tmp_path / "base"
    script = f"#!{real}/bin/python\n# -*- coding: utf-8 -*-\nfrom alembic.config import main\n".encode()
    for own in (real, link):
        rewritten = server_env.console_script_for(script, own, copy)
        assert rewritten.split(b"\n")[0] == f"#!{copy}/bin/python".encode(), rewritten
        assert rewritten.split(b"\n", 1)[1] == script.split(b"\n", 1)[1]
    activate = f"VIRTUAL_ENV={real}\nexport VIRTUAL_ENV\n".encode()
    assert server_env.console_script_for(activate, link, copy) is None  # the copy has its own
    other = b"#!/bin/sh\necho hello\n"
    assert server_env.console_script_for(other, link, copy) == other
