"""The import graph of a package tree, read with `ast` (nothing is imported): for tests/test_layers.py.

An edge A -> B means module A names module B in an import statement, at module level or inside a
function (both run); imports under `if TYPE_CHECKING:` are left out (they never run). `from P import x`
is an edge to P.x when P.x is a module of the tree, else to P; the implicit import of a module's parent
packages is not an edge (it is Python's doing, not the module's choice).
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Edge:
    src: str
    dst: str
    line: int
    local: bool  # inside a function


def modules(root: Path) -> dict[str, Path]:
    """Every module under the package directory `root`, by dotted name ("harness.run.plan")."""
    out: dict[str, Path] = {}
    for p in sorted(root.rglob("*.py")):
        parts = list(p.relative_to(root.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = p
    return out


def _type_checking_nodes(tree: ast.AST) -> set[int]:
    skip: set[int] = set()
    for n in ast.walk(tree):
        if isinstance(n, ast.If) and "TYPE_CHECKING" in ast.unparse(n.test):
            for stmt in n.body:  # the else branch does run
                skip.update(id(c) for c in ast.walk(stmt))
    return skip


def _function_nodes(tree: ast.AST) -> set[int]:
    inside: set[int] = set()
    for n in ast.walk(tree):
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            inside.update(id(c) for c in ast.walk(n) if c is not n)
    return inside


def edges(root: Path) -> list[Edge]:
    """The import edges between modules of the package at `root` (imports of other packages dropped)."""
    mods = modules(root)
    top = root.name

    def resolve(name: str) -> str | None:
        while name and name not in mods:
            name = name.rpartition(".")[0]
        return name or None

    out: list[Edge] = []
    for name, path in mods.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        skip, inside = _type_checking_nodes(tree), _function_nodes(tree)
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for n in ast.walk(tree):
            if id(n) in skip:
                continue
            targets: list[str] = []
            if isinstance(n, ast.Import):
                targets = [a.name for a in n.names]
            elif isinstance(n, ast.ImportFrom):
                base = n.module or ""
                if n.level:
                    parts = package.split(".")
                    parts = parts[: len(parts) - (n.level - 1)]
                    base = ".".join(parts + ([n.module] if n.module else []))
                for a in n.names:
                    sub = f"{base}.{a.name}"
                    targets.append(sub if sub in mods else base)
            for t in targets:
                if t != top and not t.startswith(top + "."):
                    continue
                dst = resolve(t)
                if dst and dst != name:
                    out.append(Edge(name, dst, n.lineno, id(n) in inside))
    return out


def cycles(all_edges: Iterable[Edge]) -> list[list[str]]:
    """The strongly connected components with more than one module (each one holds a cycle)."""
    graph: dict[str, set[str]] = {}
    for e in all_edges:
        graph.setdefault(e.src, set()).add(e.dst)
        graph.setdefault(e.dst, set())
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:  # Tarjan; the graph is a few hundred modules deep at most
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp: list[str] = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def rank_of(module: str, ranks: Mapping[str, int]) -> int:
    """The layer of `module` ("harness.run.plan" -> ranks["run"]; "harness" itself -> ranks["__init__"])."""
    parts = module.split(".")
    key = parts[1] if len(parts) > 1 else "__init__"
    if key not in ranks:
        raise KeyError(f"{module}: its package or module {key!r} is missing from the layer table")
    return ranks[key]


def ranks_from(table: Sequence[Sequence[str]]) -> dict[str, int]:
    """A layer table, highest first, as {name: rank}; a higher rank is a higher layer."""
    return {name: len(table) - i for i, row in enumerate(table) for name in row}


def upward(all_edges: Iterable[Edge], ranks: Mapping[str, int]) -> list[Edge]:
    """The edges from a lower layer to a higher one."""
    return [e for e in all_edges if rank_of(e.src, ranks) < rank_of(e.dst, ranks)]
