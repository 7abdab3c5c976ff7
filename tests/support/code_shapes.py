"""Code compared up to renaming, for the leak test: an answer copied from what students can read, with its
variables renamed, is still the answer.

A fragment of Python is reduced to its *shapes*: one canonical string per simple statement and per expression in
it (sub-expressions included; a compound statement, ``for`` or ``if``, through its parts), with

- every variable renamed by order of first appearance inside that statement or expression (``v0``, ``v1``...),
  so ``torch.expm1(d) - d`` and ``torch.expm1(x) - x`` have one shape (alpha-equivalence);
- a function called by name kept (``range``, ``kl_estimator_k3``), and ``module.function`` written as the bare
  function for the course's modules (``torch.expm1``, ``F.logsigmoid``, ``math.expm1`` and ``expm1`` alike), so
  that the prose's ``expm1(d) - d`` is the code's ``torch.expm1(d) - d``;
- attribute names and constants kept (``torch.exp`` is not ``torch.expm1``, ``- 1`` is not ``- 2``).

Only *non-trivial* shapes count (``is_nontrivial``): at least two operations (calls, arithmetic, unary,
comparison or boolean operators, subscripts, conditional expressions). A name, a constant or one operation
(``ref_log_p - log_p``, ``t + 1``, ``x.shape[0]``, ``torch.zeros_like(x)``, ``x.mean(dim=1, keepdim=True)``) is
the language's common idiom, which students read everywhere; ``torch.expm1(d) - d`` (a call and an operator) is
already an answer. Measured on this course: the code solutions have 26 shapes of two operations or more, and
release/ and rlhf_course/ (17,000 lines) share none of them but the two the GRPO contract states on purpose
(tests/test_release.py: ``STATED_BY_CONTRACT``); at one operation they would share 317, all harmless (``t - 1``,
``values[i]``, ``not found``). Algebra is not normalised: ``-d + torch.expm1(d)`` is another shape.
"""
from __future__ import annotations

import ast
import builtins
import re
import textwrap
from collections.abc import Iterator

MODULES = frozenset({"torch", "F", "nn", "functional", "math", "np", "numpy"})
KEPT_NAMES = frozenset(dir(builtins)) | MODULES
OPERATIONS = (ast.Call, ast.BinOp, ast.UnaryOp, ast.Compare, ast.BoolOp, ast.Subscript, ast.IfExp)
SIMPLE_STATEMENTS = (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Return, ast.Expr, ast.Delete, ast.Assert)
MAGIC_LINE = re.compile(r"^[ \t]*[%!].*$", re.MULTILINE)
FENCED_BLOCK = re.compile(r"```[a-zA-Z0-9_+-]*\n(.*?)```", re.DOTALL)
INLINE_SPAN = re.compile(r"(`+)(?!`)(.+?)(?<!`)\1(?!`)", re.DOTALL)


def parse_fragment(code: str) -> ast.Module | None:
    """``code`` as a module, indented or not, IPython magics dropped (``ast.parse`` accepts a ``return`` outside a
    function, an answer cell's body). None when it is not Python (prose in a markdown code span)."""
    code = textwrap.dedent(MAGIC_LINE.sub("", code)).strip("\n")
    if not code.strip():
        return None
    try:
        return ast.parse(code)
    except SyntaxError:
        return None


class _Shapes:
    """Each node's canonical tokens and operation counts, built bottom-up once for a whole tree (no copies)."""

    def __init__(self):
        self.tokens: dict[int, tuple] = {}
        self.counts: dict[int, int] = {}  # operations in the node's subtree

    def of(self, node: ast.AST) -> tuple:
        key = id(node)
        if key not in self.tokens:
            self.tokens[key], self.counts[key] = self._build(node)
        return self.tokens[key]

    def _build(self, node: ast.AST) -> tuple[tuple, int]:
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in MODULES:
            return (("kept", node.attr),), 0
        if isinstance(node, ast.Name):
            return (("kept" if node.id in KEPT_NAMES else "var", node.id),), 0
        if isinstance(node, ast.arg):
            return (("var", node.arg),), 0
        tokens: list = ["(", type(node).__name__]
        operations = int(isinstance(node, OPERATIONS))
        for field, value in ast.iter_fields(node):
            if field in ("ctx", "type_comment", "kind"):
                continue
            for item in (value if isinstance(value, list) else [value]):
                if field == "func" and isinstance(item, ast.Name):  # a function called by name keeps it
                    tokens.append(("kept", item.id))
                elif isinstance(item, ast.AST):
                    tokens.extend(self.of(item))
                    operations += self.counts[id(item)]
                else:
                    tokens.append(repr(item))
        tokens.append(")")
        return tuple(tokens), operations

    def shape(self, node: ast.AST) -> str:
        """The canonical string of one statement or expression, its variables renamed from ``v0``."""
        names: dict[str, str] = {}
        out = []
        for token in self.of(node):
            if isinstance(token, tuple):
                kind, name = token
                out.append(names.setdefault(name, f"v{len(names)}") if kind == "var" else name)
            else:
                out.append(token)
        return " ".join(out)

    def is_nontrivial(self, node: ast.AST) -> bool:
        """At least two operations (see the module's docstring for why)."""
        self.of(node)
        return self.counts[id(node)] >= 2


def shapes(tree: ast.AST) -> Iterator[tuple[str, ast.AST]]:
    """(shape, node) of every non-trivial expression and simple statement in ``tree``, nested ones included (a
    compound statement, ``for`` or ``if``, is compared through its parts)."""
    found = _Shapes()
    for node in ast.walk(tree):
        if isinstance(node, (ast.expr, *SIMPLE_STATEMENTS)) and found.is_nontrivial(node):
            yield found.shape(node), node


def code_spans(markdown: str) -> list[str]:
    """The code of a markdown text: its fenced blocks and its inline spans (single or double backticks)."""
    fenced = FENCED_BLOCK.findall(markdown)
    rest = FENCED_BLOCK.sub("", markdown)
    return fenced + [span.strip() for _, span in INLINE_SPAN.findall(rest)]


def docstring_spans(tree: ast.AST) -> list[str]:
    """The ``literal`` spans (reStructuredText, double backticks) of every string constant in a module's tree."""
    spans = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and "``" in node.value:
            spans += [span.strip() for span in re.findall(r"``(.+?)``", node.value, re.DOTALL)]
    return spans
