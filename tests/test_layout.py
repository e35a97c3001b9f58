"""The layout of the package (docs/design.md): no import circles, no feature importing
another, and few imports of tisa modules inside functions."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "tisa"
FEATURES = ("analysis", "pretrain", "glue", "convert", "longeval")


def _modules() -> dict[str, Path]:
    out = {}
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        out[name] = path
    return out


def _imports(modules: dict[str, Path]) -> tuple[dict[str, set[str]], int]:
    """Module -> the tisa modules it imports (anywhere in it), and how many import
    statements of tisa modules sit inside functions."""
    graph: dict[str, set[str]] = {}
    inside = 0
    for name, path in modules.items():
        tree = ast.parse(path.read_text())
        nested = {
            id(node)
            for fn in ast.walk(tree)
            if isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef)
            for node in ast.walk(fn)
        }
        targets = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module and not node.level:
                found = [f"{node.module}.{a.name}" for a in node.names]
                found = [m if m in modules else node.module for m in found]
            elif isinstance(node, ast.Import):
                found = [a.name for a in node.names]
            else:
                continue
            found = [m for m in found if m.split(".")[0] == "tisa"]
            inside += bool(found) and id(node) in nested
            for target in found:
                while target not in modules:
                    target = target.rsplit(".", 1)[0]
                if target != name and not name.startswith(target + "."):  # not a parent
                    targets.add(target)
        graph[name] = targets
    return graph, inside


def _feature(name: str) -> str | None:
    parts = name.split(".")
    return parts[1] if len(parts) > 1 and parts[1] in FEATURES else None


def test_no_feature_imports_another():
    graph, _ = _imports(_modules())
    crossing = sorted(
        (a, b)
        for a, bs in graph.items()
        for b in bs
        if _feature(a) and _feature(b) not in (None, _feature(a))
    )
    assert crossing == []


def test_no_import_circles():
    graph, _ = _imports(_modules())
    state: dict[str, int] = {}
    circles = []

    def visit(name: str, path: list[str]) -> None:
        state[name] = 1
        for target in graph.get(name, ()):
            if state.get(target) == 1:
                circles.append(path[path.index(target) :] + [target])
            elif target not in state:
                visit(target, [*path, target])
        state[name] = 2

    for name in sorted(graph):
        if name not in state:
            visit(name, [name])
    assert circles == []


def test_few_imports_inside_functions():
    _, inside = _imports(_modules())
    assert inside < 30
