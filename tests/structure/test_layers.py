"""The package layering holds: no module imports a layer above its own (lazy and TYPE_CHECKING imports count too).

A back-arrow (the GPU parser importing the fleet's events, the BenchScreen importing a CLI command, the app
and the demo importing each other) is how the layers melted before issue 14; this test names any new one.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2] / "console"

RANK = {
    "": 0,  # console/*.py: config, masking, remote_text, hostjson, linecap, tomlpos
    "gpu": 1,
    "sglang": 1,
    "sim": 1,
    "transport": 2,  # its HTTP pool reads with sglang.httpbound's bounds
    "fleet": 3,
    "router": 4,
    "ui": 5,
    "serve": 5,
    "commands": 6,
    "cli": 7,  # console/cli.py and console/__main__.py
}
"""Lower imports nothing higher; a package may import itself and anything of a lower rank."""

LEAVES = {
    "console.router.spec": "the [routers.*] config model (pydantic only), part of config.py's Fleet",
}
"""Modules of a higher package that import nothing of the console, so the base layer may import them."""


def layer(module: str) -> str:
    if module in LEAVES:
        return ""
    parts = module.split(".")[1:]
    if not parts:
        return ""
    if (ROOT / parts[0]).is_dir():
        return parts[0]
    return "cli" if parts[0] in ("cli", "__main__") else ""


def imports(path: Path) -> list[tuple[int, str]]:
    out = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module and node.module.startswith("console"):
            out.append((node.lineno, node.module))
        elif isinstance(node, ast.Import):
            out.extend((node.lineno, a.name) for a in node.names if a.name.startswith("console"))
    return out


def module_of(path: Path) -> str:
    parts = path.relative_to(ROOT.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def test_every_package_has_a_rank() -> None:
    packages = {p.name for p in ROOT.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    assert packages <= set(RANK), f"place the new package(s) {sorted(packages - set(RANK))} in RANK"


def test_no_module_imports_a_higher_layer() -> None:
    wrong = []
    for path in sorted(ROOT.rglob("*.py")):
        me = layer(module_of(path))
        for line, target in imports(path):
            them = layer(target)
            if them != me and RANK.get(them, 99) >= RANK.get(me, 99):
                wrong.append(f"{path.relative_to(ROOT.parent)}:{line}: {me or 'console'} imports {target}")
    assert not wrong, "\n".join(wrong)


def test_leaves_import_nothing_of_the_console() -> None:
    for mod in LEAVES:
        path = ROOT.parent / (mod.replace(".", "/") + ".py")
        assert imports(path) == [], f"{mod} is a leaf (LEAVES) but imports {imports(path)}"


def test_the_checker_sees_a_back_arrow(tmp_path: Path) -> None:
    """The walk finds imports inside functions and TYPE_CHECKING blocks (where the old back-arrows hid)."""
    f = tmp_path / "m.py"
    f.write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from console.ui.app import DflashApp\n"
        "def f():\n    import console.commands.bench\n"
    )
    assert [t for _, t in imports(f)] == ["console.ui.app", "console.commands.bench"]
    assert RANK[layer("console.ui.app")] > RANK[layer("console.fleet.state")]
    assert layer("console.config") == "" and layer("console.cli") == "cli"


KNOWN_CYCLES = [
    {"console.config", "console.masking"},  # masking remembers config secrets; config masks its errors
    {"console.sim.serve", "console.sim.server"},
]
"""Import cycles left (TYPE_CHECKING imports count: they are the same coupling). Shrink this, never grow it."""


def module_graph() -> dict[str, set[str]]:
    paths = {module_of(p): p for p in ROOT.rglob("*.py")}
    graph: dict[str, set[str]] = {m: set() for m in paths}
    for m, p in paths.items():
        for node in ast.walk(ast.parse(p.read_text(), str(p))):
            names: list[str] = []
            if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module, *(f"{node.module}.{a.name}" for a in node.names)]
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            graph[m].update(n for n in names if n in paths and n != m)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[set[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    out: list[set[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = set()
            while True:
                w = stack.pop()
                comp.add(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(comp)

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_no_new_import_cycle() -> None:
    """The fleet actions <-> controller, ui app <-> demo and app <-> actions/screens cycles are gone; a new one
    (or a known one grown) fails."""
    new = [sorted(c) for c in cycles(module_graph()) if not any(c <= known for known in KNOWN_CYCLES)]
    assert not new, new


def test_the_cycle_finder_finds_a_cycle() -> None:
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [{"a", "b", "c"}]
