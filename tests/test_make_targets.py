"""The Makefile's lab targets start as root too: JupyterLab refuses root without --allow-root, and root is how the
course's grading runs (`make grade`), so both labs pass it when run by uid 0, and only then."""
import os
import subprocess
import sys
from pathlib import Path

import pytest


@pytest.mark.parametrize("target", ["lab", "lab-instructor"])
def test_the_lab_targets_allow_root_exactly_when_run_as_root(target, repo):
    stamp = Path(sys.executable).parent.parent / ".installed-stamp"  # never rebuilt here (-o)
    commands = subprocess.run(["make", "--no-print-directory", "-n", "-C", str(repo), "-o", str(stamp), target],
                              capture_output=True, text=True, check=True).stdout
    [lab] = [line for line in commands.splitlines() if "jupyter lab" in line]
    assert ("--allow-root" in lab) == (os.getuid() == 0), lab
