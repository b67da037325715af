"""The package's import graph has the shape docs/architecture.md draws: no cycle between
pt2onnx modules, and no import that goes up the layer order written there.

Read from the source with ``ast`` (every import, also those inside functions, except
under ``if TYPE_CHECKING:``), so nothing of pt2onnx is run. Run this file as a script
to print the graph's edges between layers."""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src"
DOC = ROOT / "docs" / "architecture.md"


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def modules() -> dict[str, Path]:
    return {_module_name(p): p for p in sorted((SRC / "pt2onnx").rglob("*.py"))}


def _type_checking_lines(tree: ast.AST) -> set[int]:
    lines: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for sub in node.body:
                lines.update(range(sub.lineno, (sub.end_lineno or sub.lineno) + 1))
    return lines


def imports(name: str, path: Path, known: dict[str, Path]) -> set[str]:
    """The pt2onnx modules ``name`` imports (a ``from a import b`` of a submodule ``b``
    counts as an import of ``a.b``; of a name defined in ``a``, of ``a``)."""
    tree = ast.parse(path.read_text())
    skip = _type_checking_lines(tree)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out: set[str] = set()
    for node in ast.walk(tree):
        if getattr(node, "lineno", None) in skip:
            continue
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[:len(anchor) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in known else base
                       for a in node.names]
        else:
            continue
        for target in targets:
            while target and target not in known:
                target = target.rpartition(".")[0]
            if target.startswith("pt2onnx") and target != name:
                out.add(target)
    return out


def graph() -> dict[str, set[str]]:
    known = modules()
    return {name: imports(name, path, known) for name, path in known.items()}


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    found: list[list[str]] = []
    sys.setrecursionlimit(10_000)

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(edges.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            part = []
            while True:
                w = stack.pop()
                on.discard(w)
                part.append(w)
                if w == v:
                    break
            if len(part) > 1:
                found.append(sorted(part))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return found


def layers() -> list[tuple[int, list[str]]]:
    """The layer table of docs/architecture.md: (layer, module prefixes), from the lines
    ``| N | `a`, `b` | ... |`` between the "Layers" heading and the next heading."""
    text = DOC.read_text()
    section = text.split("## Layers", 1)[1].split("\n## ", 1)[0]
    out = []
    for line in section.splitlines():
        match = re.match(r"\|\s*(\d+)\s*\|([^|]*)\|", line)
        if match:
            out.append((int(match.group(1)), re.findall(r"`([\w.]+)`", match.group(2))))
    return out


def layer_of(module: str, table: list[tuple[int, list[str]]]) -> int | None:
    """The layer of the longest entry in the table that names ``module`` or a folder
    above it."""
    best: tuple[int, int] | None = None
    for layer, prefixes in table:
        for prefix in prefixes:
            # "pt2onnx" is the package's __init__ alone, not everything under it.
            if module == prefix or (prefix != "pt2onnx" and module.startswith(prefix + ".")):
                if best is None or len(prefix) > best[0]:
                    best = (len(prefix), layer)
    return None if best is None else best[1]


def test_no_import_cycles() -> None:
    found = cycles(graph())
    assert not found, (
        "import cycles between pt2onnx modules: "
        + "; ".join(" <-> ".join(c) for c in found)
        + ". Next step: move what both sides need down into a module both may import "
        "(docs/architecture.md, \"Layers\").")


def test_every_module_has_a_layer() -> None:
    table = layers()
    assert table, "docs/architecture.md has no layer table under '## Layers'"
    missing = [m for m in modules() if layer_of(m, table) is None]
    assert not missing, f"modules without a layer in docs/architecture.md: {missing}"


def test_imports_go_down_the_layers() -> None:
    """A module imports only modules of its own layer or below."""
    table = layers()
    upward = []
    for module, targets in graph().items():
        mine = layer_of(module, table)
        for target in sorted(targets):
            theirs = layer_of(target, table)
            if mine is not None and theirs is not None and theirs > mine:
                upward.append(f"{module} (layer {mine}) imports {target} (layer {theirs})")
    assert not upward, "imports that go up the layers of docs/architecture.md:\n" + "\n".join(
        upward)


if __name__ == "__main__":
    table = layers()
    for module, targets in sorted(graph().items()):
        for target in sorted(targets):
            print(f"{layer_of(module, table)} {module} -> {layer_of(target, table)} {target}")
    print("cycles:", cycles(graph()))


def _folder(module: str, known: dict[str, Path]) -> str:
    return module if known[module].name == "__init__.py" else module.rpartition(".")[0]


def private_crossings() -> list[str]:
    """``a uses b._name`` where ``b`` is a module of another folder: imported by name
    (``from b import _name``) or read as an attribute (``b._name``)."""
    known = modules()
    found: set[str] = set()
    for name, path in known.items():
        tree = ast.parse(path.read_text())
        alias: dict[str, str] = {}
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("pt2onnx"):
                source = node.module or ""
                for a in node.names:
                    if f"{source}.{a.name}" in known:
                        alias[a.asname or a.name] = f"{source}.{a.name}"
                    elif (a.name.startswith("_") and not a.name.startswith("__")
                          and source in known
                          and _folder(source, known) != _folder(name, known)):
                        found.add(f"{name} imports {source}.{a.name}")
        for node in ast.walk(tree):
            if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
                    and node.value.id in alias and node.attr.startswith("_")
                    and not node.attr.startswith("__")):
                source = alias[node.value.id]
                if _folder(source, known) != _folder(name, known):
                    found.add(f"{name} reads {source}.{node.attr}")
    return sorted(found)


def _is_private(module: str) -> bool:
    return any(p.startswith("_") and not p.startswith("__") for p in module.split(".")[1:])


def _owner(module: str) -> str:
    """The package whose private module ``module`` is: the part before its first private
    component (``pt2onnx.capture`` for ``pt2onnx.capture._resize``)."""
    parts = module.split(".")
    first = next(i for i, p in enumerate(parts) if i and p.startswith("_") and not p.startswith("__"))
    return ".".join(parts[:first])


def door_violations(edges: dict[str, set[str]], known: dict[str, Path]) -> list[str]:
    """``a imports b`` where ``b`` is a private module of a package ``a`` is not inside:
    another folder's insides, reached around its door (its ``__init__``)."""
    found = []
    for module, targets in edges.items():
        mine = _folder(module, known) if module in known else module.rpartition(".")[0]
        for target in sorted(targets):
            if not _is_private(target):
                continue
            owner = _owner(target)
            if not (mine == owner or mine.startswith(owner + ".")):
                found.append(f"{module} imports {target} (go through {owner}'s door, "
                             f"{owner.replace('.', '/')}/__init__.py)")
    return found


def test_imports_across_folders_go_through_doors() -> None:
    """A module imports another folder only through that folder's ``__init__`` (its door);
    a package's own private modules are open to everything inside it (``pt2onnx._compat``
    to every folder, ``capture._resize`` only inside ``capture``)."""
    found = door_violations(graph(), modules())
    assert not found, ("imports around a folder's door:\n" + "\n".join(found)
                       + "\nNext step: name what you need in that folder's __init__.py "
                       "(its __all__) and import it from there.")


def test_benchmarks_go_through_the_doors_too() -> None:
    """The benchmarks are a user of the package: they import each folder through its door
    (``benchmarks/meta_export.py`` reached into ``llm._meta`` and ``save._weights``)."""
    known = modules()
    edges = {f"benchmarks.{p.stem}": imports(f"benchmarks.{p.stem}", p, known)
             for p in sorted((ROOT / "benchmarks").glob("*.py"))}
    found = door_violations(edges, known)
    assert not found, "benchmarks around a folder's door:\n" + "\n".join(found)


def test_the_door_check_fails_on_a_planted_violation(tmp_path: Path) -> None:
    """A rule that reaches into translate's registry is caught; the same name through the
    rule API, and a folder using its own private module, are not."""
    known = modules()
    planted = tmp_path / "planted.py"
    planted.write_text("from pt2onnx.translate._registry import translation\n"
                       "from pt2onnx.rules._common import aten\n"
                       "from pt2onnx.rule_api import RuleContext\n"
                       "from pt2onnx import _compat\n")
    edges = {"pt2onnx.rules.planted": imports("pt2onnx.rules.planted", planted, known)}
    known = {**known, "pt2onnx.rules.planted": planted}
    found = door_violations(edges, known)
    assert len(found) == 1 and "pt2onnx.translate._registry" in found[0], found


def test_no_private_names_across_folders() -> None:
    """A folder's private names (``_name``) are its own: what another folder needs is
    public in the module that owns it."""
    found = private_crossings()
    assert not found, "private names used across folders:\n" + "\n".join(found)


def test_the_checks_can_fail() -> None:
    """The cycle search and the layer lookup on made-up graphs: a cycle is found, and an
    import from a layer-2 module into capture (layer 3) is upward."""
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []
    table = layers()
    assert layer_of("pt2onnx.rules.nn", table) == 2
    assert layer_of("pt2onnx.capture._dynamic", table) == 3
    assert layer_of("pt2onnx._not_listed", table) is None


def test_imports_seen_inside_functions(tmp_path: Path) -> None:
    """A lazy import inside a function counts (it is how cycles hide); one under
    ``if TYPE_CHECKING:`` does not."""
    src = tmp_path / "m.py"
    src.write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                   "    from pt2onnx import _api\n"
                   "def f():\n    from pt2onnx.capture import _dynamic\n")
    known = modules()
    assert imports("pt2onnx.rules.m", src, known) == {"pt2onnx.capture._dynamic"}
