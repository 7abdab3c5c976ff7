"""Validate on a busy hub (issue #37): a kernel whose set-up cell's output comes seconds after its reply (as the
set-up cell's `import torch` does when a class loads the machine) passes with the classroom's Jupyter config; with
nbclient's defaults it fails with "Timeout waiting for IOPub output".  The kernel is slowed by its own cell, no
load needed: the set-up cell delays the "idle" status that ends its output.  About 8 s (two Validates at once)."""
import os
import subprocess
import tempfile
from pathlib import Path

import nbformat
from nbclient import NotebookClient
from nbformat.v4 import new_code_cell, new_notebook

from rlhf_course.classroom.hub import write_everyone_config

LATE = NotebookClient.iopub_timeout.default_value + 1  # seconds the output comes after the reply
SLOW_SET_UP = f'''import time
kernel = get_ipython().kernel
_send = kernel.session.send
def _late_idle(stream, msg_or_type, content=None, *args, **kwargs):
    if msg_or_type == "status" and (content or {{}}).get("execution_state") == "idle":
        kernel.session.send = _send  # once: the set-up cell's
        time.sleep({LATE})
    return _send(stream, msg_or_type, content, *args, **kwargs)
kernel.session.send = _late_idle
ready = 42
'''


def notebook(folder: Path) -> Path:
    test = {"nbgrader": {"grade": True, "grade_id": "uses_set_up", "points": 1, "solution": False, "locked": True,
                         "schema_version": 3}}
    nb = new_notebook(cells=[new_code_cell(SLOW_SET_UP), new_code_cell("assert ready == 42", metadata=test)])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    path = folder / "slow.ipynb"
    nbformat.write(nb, path)
    return path


def validate(path: Path, config_path: Path, runtime: Path) -> subprocess.Popen:
    env = {k: v for k, v in os.environ.items() if not k.startswith("JUPYTER")}
    env.update(JUPYTER_CONFIG_PATH=str(config_path), JUPYTER_RUNTIME_DIR=str(runtime),
               JUPYTER_CONFIG_DIR=str(config_path / "none"))
    return subprocess.Popen(["nbgrader", "validate", path.name], cwd=path.parent, env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)


def test_validate_waits_for_a_busy_kernel(repo, tmp_path):
    classroom, stock = tmp_path / "everyone", tmp_path / "stock"
    write_everyone_config(classroom, repo)  # what every user's server and Validate read on the hub
    stock.mkdir()
    with tempfile.TemporaryDirectory(prefix="rt-") as runtime:  # short: a Unix socket's path has 107 bytes
        runs = {}
        for name, config in (("classroom", classroom), ("stock", stock)):
            folder = tmp_path / name / "work"
            folder.mkdir(parents=True)
            runs[name] = validate(notebook(folder), config, Path(runtime) / name)
        out = {name: run.communicate(timeout=120)[0] for name, run in runs.items()}
    assert "Success! Your notebook passes all the tests." in out["classroom"], out["classroom"][-3000:]
    assert "Timeout waiting for IOPub output" in out["stock"], out["stock"][-3000:]  # the simulation is issue #37's
