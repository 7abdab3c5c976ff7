"""The package's module map: imports run one way, as pyproject.toml's import-linter contracts say (the floors,
grading's layers, the wings, no cycle: imports inside functions count), the writers' leaf modules pull in neither
torch nor the sandbox, and tests share helpers through ``tests/support`` only (no test imports conftest or another
test file)."""
from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def lint(config: Path, root: Path) -> tuple[int, str]:
    """import-linter's verdict on the contracts in ``config`` for the packages under ``root``: (exit code, report)."""
    run = subprocess.run([sys.executable, "-c", "import sys; from importlinter.cli import lint_imports; "
                          "sys.exit(lint_imports(config_filename=sys.argv[1], no_cache=True))", str(config)],
                         capture_output=True, text=True, cwd=root, env={**os.environ, "PYTHONPATH": str(root)})
    return run.returncode, run.stdout + run.stderr


def test_the_package_keeps_its_import_contracts():
    """pyproject.toml's contracts: the floors, grading's layers, the wings apart, the exchange and the labs without
    the grader, no cycle (imports inside functions count), the students' config without the launcher."""
    code, report = lint(REPO / "pyproject.toml", REPO)
    assert code == 0, report
    assert "6 kept, 0 broken" in report, report


def test_the_contracts_catch_an_upward_import_and_a_cycle(tmp_path):
    package = tmp_path / "pkg"
    (package / "high").mkdir(parents=True)
    (package / "low").mkdir()
    for init in (package, package / "high", package / "low"):
        (init / "__init__.py").write_text("")
    (package / "high" / "a.py").write_text("def later():\n    from pkg.high import b\n")
    (package / "high" / "b.py").write_text("from pkg.high import a\n")
    (package / "low" / "c.py").write_text("def later():\n    import pkg.high.a\n")
    config = tmp_path / "contracts.toml"
    config.write_text('[tool.importlinter]\nroot_package = "pkg"\n'
                      '[[tool.importlinter.contracts]]\nname = "floors"\ntype = "layers"\n'
                      'layers = ["pkg.high", "pkg.low"]\n'
                      '[[tool.importlinter.contracts]]\nname = "no cycle"\ntype = "acyclic_siblings"\n'
                      'ancestors = ["pkg"]\n')
    code, report = lint(config, tmp_path)
    assert code == 1 and "0 kept, 2 broken" in report, report
    assert "pkg.low.c -> pkg.high.a" in report, report


def test_results_and_their_writers_load_without_torch_or_the_sandbox():
    leaves = ["grading.results", "course.limits", "grading.sandbox.protocol", "course.settings", "grading.gradebook.report",
              "grading.gradebook.gradebook", "grading.intake", "grading.gradebook.export", "spreadsheet"]
    code = ("import sys\n" + "".join(f"import rlhf_course.{m}\n" for m in leaves)
            + "heavy = [m for m in ('torch', 'rlhf_course.grading.sandbox.sandbox', 'rlhf_course.grading.trusted') "
              "if m in sys.modules]\nprint(heavy)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_no_test_imports_conftest_or_another_test_file():
    tests = REPO / "tests"
    offenders = []
    for path in tests.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [("." * node.level) + (node.module or "")] if isinstance(node, ast.ImportFrom) else [])
            for name in names:
                last = name.rpartition(".")[2]
                if last == "conftest" or last.startswith("test_"):
                    offenders.append(f"{path.relative_to(REPO)}: {name}")
    assert offenders == []


def _imported_names(path: Path) -> list[str]:
    names = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and not node.level:
            names.append(node.module or "")
    return names


def test_no_script_and_no_module_of_the_package_imports_the_tests():
    """What ships or is run by hand (the package, the deploy and bench scripts) stands without tests/: what tests
    alone use lives in tests/support."""
    scripts = [p for folder in ("rlhf_course", "deploy", "bench") for p in (REPO / folder).rglob("*.py")]
    offenders = [f"{path.relative_to(REPO)}: {name}" for path in scripts for name in _imported_names(path)
                 if name == "tests" or name.startswith("tests.")]
    assert len(scripts) > 100 and offenders == []
