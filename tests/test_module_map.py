"""The package's module map: imports run one way (no cycle, counting imports inside functions too), the
writers' leaf modules pull in neither torch nor the sandbox, and tests share helpers through
``tests/support`` only (no test imports conftest or another test file)."""
from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PACKAGE = REPO / "rlhf_course"


def module_name(path: Path) -> str:
    parts = list(path.relative_to(REPO).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported_modules(path: Path, known: set[str]) -> set[str]:
    """Every module of ``known`` that ``path`` imports, at any depth of its code (functions included)."""
    found = set()
    package = module_name(path) if path.name == "__init__.py" else module_name(path).rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package.split(".")[: len(package.split(".")) - node.level + 1] + ([base] if base else []))
            names = [base] + [f"{base}.{alias.name}" for alias in node.names]
        else:
            continue
        for name in names:
            while name and name not in known:
                name = name.rpartition(".")[0]
            if name:
                found.add(name)
    return found


def import_graph(root: Path) -> dict[str, set[str]]:
    files = {module_name(p): p for p in root.rglob("*.py")}
    packages = {name for name, p in files.items() if p.name == "__init__.py"}
    graph = {}
    for name, path in files.items():
        # a package's __init__ is what `import package.sub` runs first: not an edge worth a cycle
        graph[name] = {m for m in imported_modules(path, set(files)) if m != name and m not in packages}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index, low, on_stack, stack, found = {}, {}, set(), [], []
    counter = [0]

    def visit(node):
        index[node] = low[node] = counter[0]
        counter[0] += 1
        stack.append(node)
        on_stack.add(node)
        for target in graph.get(node, ()):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_the_package_has_no_import_cycle_not_even_inside_functions():
    graph = import_graph(PACKAGE)
    assert "rlhf_course.grading.trusted" in graph and graph["rlhf_course.grading.batch"]
    assert cycles(graph) == []


def test_the_cycle_finder_finds_a_cycle_through_a_function_level_import(tmp_path):
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "a.py").write_text("from pkg import b\n")
    (package / "b.py").write_text("def later():\n    from pkg.a import thing\n")
    (package / "c.py").write_text("import pkg.a\n")
    global REPO
    saved, REPO = REPO, tmp_path
    try:
        assert cycles(import_graph(package)) == [["pkg.a", "pkg.b"]]
    finally:
        REPO = saved


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
