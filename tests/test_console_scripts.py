"""The console scripts pyproject.toml declares beside `python -m`: each name resolves to a callable, run as pip's
generated script runs it (its own process, the script's name in argv[0]), and its --help ends with examples of
that very command."""
import subprocess
import sys
import tomllib
from importlib.metadata import EntryPoint
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
SCRIPTS = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["scripts"]


def run_script(name: str, *args: str) -> subprocess.CompletedProcess:
    """The console script ``name`` with ``args``, as pip's wrapper calls it: ``sys.exit(entry_point())``."""
    wrapper = ("import sys\nfrom importlib.metadata import EntryPoint\n"
               f"sys.argv = [{name!r}, *sys.argv[1:]]\n"
               f"sys.exit(EntryPoint({name!r}, {SCRIPTS[name]!r}, 'console_scripts').load()())\n")
    return subprocess.run([sys.executable, "-c", wrapper, *args], capture_output=True, text=True, cwd=REPO,
                          timeout=120)


def test_the_scripts_are_the_python_m_commands():
    assert SCRIPTS == {"rlhf-grader": "rlhf_course.grading.__main__:main",
                       "rlhf-classroom": "rlhf_course.classroom.__main__:main"}
    for name, target in SCRIPTS.items():
        assert callable(EntryPoint(name, target, "console_scripts").load()), name


def test_each_script_runs_and_its_help_ends_with_examples():
    grader = run_script("rlhf-grader", "--help")
    assert grader.returncode == 0, grader.stderr
    assert "\n    rlhf-grader COMMAND --help" in grader.stdout.split("Examples\n--------\n", 1)[1], grader.stdout
    classroom = run_script("rlhf-classroom", "--help")
    assert classroom.returncode == 0, classroom.stderr
    shown = classroom.stdout.split("\nexamples (", 1)[1]
    assert "\n  sudo .venv/bin/rlhf-classroom --proxy PROXY --class burst" in shown, classroom.stdout


@pytest.mark.parametrize("command, examples", [
    (["grade"], ["sudo .venv/bin/rlhf-grader grade rlhf --student=alice --workers=2"]),
    (["extend"], ["rlhf-grader extend alice rlhf --hours 48", "rlhf-grader extend --list"]),
    (["editions", "revisit"], ["rlhf-grader editions revisit rlhf.zh-CN.json intro"]),
])
def test_each_grader_commands_help_ends_with_its_examples(command, examples, capsys):
    from rlhf_course.grading.app import main
    assert main([*command, "--help"]) == 0
    shown = capsys.readouterr().out.split("Examples\n--------\n", 1)[1]  # after the options, as nbgrader's
    for example in examples:
        assert f"\n    {example}" in shown, shown


def test_prestarts_help_ends_with_its_examples(capsys):
    from rlhf_course.classroom.__main__ import main
    with pytest.raises(SystemExit) as done:
        main(["prestart", "--help"])
    assert done.value.code == 0
    shown = capsys.readouterr().out.split("\nexamples (", 1)[1]
    assert "\n  sudo .venv/bin/rlhf-classroom prestart alice bob --parallel 1" in shown
