"""The package's modules import one another without circles.

A module that imports a module that imports it back cannot be understood,
tested or loaded alone, and its import order decides what works.  Imports
are read from the source (``ast``), so every import counts: at the top of a
module, inside a function (the usual way a circle is hidden) and under
``TYPE_CHECKING``.  ``from pkg import name`` is an import of the module
``pkg.name`` where that module exists, else of ``pkg`` itself.
"""

from __future__ import annotations

import ast
from pathlib import Path

import rankmap

PACKAGE = Path(rankmap.__file__).parent


def module_names(root: Path = PACKAGE) -> dict[str, Path]:
    """Every module of the package by dotted name (a package by its own name,
    a compiled kernel module by its ``.pyx``)."""
    out = {}
    for path in sorted([*root.rglob("*.py"), *root.rglob("*.pyx")]):
        parts = list(path.relative_to(root.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def imports_of(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The package's modules that module ``name`` imports, anywhere in it."""
    top = name.split(".")[0]
    here = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]

    def known(dotted: str) -> str:
        while dotted not in modules:
            dotted = dotted.rpartition(".")[0]
        return dotted

    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            found |= {known(a.name) for a in node.names if a.name.split(".")[0] == top}
        elif isinstance(node, ast.ImportFrom):
            base = here[:len(here) - node.level + 1] if node.level else []
            source = ".".join(base + ([node.module] if node.module else []))
            if source.split(".")[0] != top:
                continue
            for alias in node.names:
                found.add(known(f"{source}.{alias.name}" if f"{source}.{alias.name}" in modules else source))
    found.discard(name)
    return found


def import_circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan,
    iterative): each is a set of modules that import one another in a loop."""
    index, low, on_stack, stack, circles = {}, {}, set(), [], []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    circles.append(sorted(component))
    return circles


def import_graph(root: Path = PACKAGE) -> dict[str, set[str]]:
    """Each module's imports of the package's modules; a compiled module
    imports none (what it ``cimport``s is compiled into it)."""
    modules = module_names(root)
    return {name: imports_of(name, path, modules) if path.suffix == ".py" else set()
            for name, path in modules.items()}


def test_no_import_circle_among_the_package_modules():
    graph = import_graph()
    circles = import_circles(graph)
    report = "\n".join(" <-> ".join(c) + "\n" + "\n".join(f"    {m} imports {sorted(graph[m] & set(c))}" for m in c)
                       for c in circles)
    assert not circles, "import circles:\n" + report


def test_the_check_finds_a_circle_hidden_in_a_function(tmp_path):
    pkg = tmp_path / "pkg"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("from .registry import register\n")
    (pkg / "registry.py").write_text("def register():\n    pass\n")
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "sub" / "a.py").write_text("from .. import register\nfrom .b import f\n")
    (pkg / "sub" / "b.py").write_text("def f():\n    from .a import g\n")
    (pkg / "c.py").write_text("import pkg.sub.a\n")
    graph = import_graph(pkg)
    assert graph["pkg.sub.a"] == {"pkg", "pkg.sub.b"}  # `from .. import register` is the package itself
    assert graph["pkg.c"] == {"pkg.sub.a"}
    assert import_circles(graph) == [["pkg.sub.a", "pkg.sub.b"]]
    (pkg / "sub" / "b.py").write_text("def f():\n    pass\n")
    assert import_circles(import_graph(pkg)) == []
