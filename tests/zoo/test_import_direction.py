"""The house's plan: imports run one way, from the layers up to the command line.

Every module of layers/, training/ and zoo/ is read (not imported) and each `import` in it, at
module level or inside a function (not those under `if TYPE_CHECKING:`), is an edge from its package to the imported one. An edge
may only point to the same level or one below, in the order of `LEVELS`; the one sanctioned
edge up is `from_preset` reaching the loader (zoo.models.architectures -> zoo.hub.loader), as
keras-hub's preset loader does. Modules must not import each other in a cycle either.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
# Installed name -> folder in the checkout (pyproject.toml's package-dir).
FOLDERS = {"zoo.layers": ROOT / "layers", "zoo.training": ROOT / "training", "zoo": ROOT / "zoo"}
# Bottom to top: a module may import from its own level and the levels before it.
# Inside zoo.training, `errors` (UserError) and `files` (the file plumbing) sit below the rest of
# the kit, which reports a user's mistake and writes its files through them.
LEVELS = ["zoo.layers", "zoo.training.errors", "zoo.training.files", "zoo.training", "zoo.runtime",
          "zoo.version", "zoo.text", "zoo.generation", "zoo.models", "zoo.converters", "zoo.hub",
          "zoo.serving", "zoo.recipes", "zoo.pipelines", "zoo.bench", "zoo.cli"]
SANCTIONED = {("zoo.models.architectures", "zoo.hub.loader")}


def module_files() -> dict[str, Path]:
    """Every module of the three packages by its installed dotted name."""
    modules = {}
    for package, folder in FOLDERS.items():
        for path in sorted(folder.rglob("*.py")):
            parts = path.relative_to(folder).with_suffix("").parts
            if package == "zoo" and parts[0] in ("layers", "training"):
                continue
            name = ".".join((package, *parts)).removesuffix(".__init__")
            modules[name] = path
    return modules


MODULES = module_files()


def imports_of(name: str, path: Path) -> set[str]:
    """The modules of the three packages that `name` imports (an attribute imported from a
    package counts as the package, a submodule as the submodule)."""
    is_package = path.name == "__init__.py"
    tree = ast.parse(path.read_text(), str(path))
    # Imports for type checkers only never run.
    typing_only = {id(n) for block in ast.walk(tree) if isinstance(block, ast.If)
                   and ast.unparse(block.test) in ("TYPE_CHECKING", "typing.TYPE_CHECKING")
                   for statement in block.body for n in ast.walk(statement)}
    found = set()
    for node in ast.walk(tree):
        if id(node) in typing_only:
            continue
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = name.split(".")
                base = base[:len(base) - node.level + (1 if is_package else 0)]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module
            targets = [f"{module}.{alias.name}" if f"{module}.{alias.name}" in MODULES
                       else module for alias in node.names]
        else:
            continue
        found.update(t for t in targets if t in MODULES)
    found.discard(name)
    return found


EDGES = {name: imports_of(name, path) for name, path in MODULES.items()}


def level(name: str) -> int:
    """The index in LEVELS of the longest prefix of `name` (the facade `zoo` is on top)."""
    matches = [i for i, prefix in enumerate(LEVELS)
               if name == prefix or name.startswith(prefix + ".")]
    return max(matches, key=lambda i: len(LEVELS[i])) if matches else len(LEVELS)


def test_every_module_has_a_level():
    assert [n for n in MODULES if level(n) == len(LEVELS) and n != "zoo"] == []


def test_imports_point_down_or_sideways():
    upward = sorted(f"{a} -> {b}" for a, targets in EDGES.items() for b in targets
                    if level(b) > level(a) and (a, b) not in SANCTIONED)
    assert upward == []


def test_the_sanctioned_edge_is_the_only_exception_and_still_exists():
    for a, b in SANCTIONED:
        assert b in EDGES[a], f"{a} no longer imports {b}: drop it from SANCTIONED"


def test_no_import_cycles():
    edges = {a: {b for b in targets if (a, b) not in SANCTIONED}
             for a, targets in EDGES.items()}
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    cycles = []

    def visit(node: str, path: list[str]) -> None:
        state[node] = 1
        for nxt in sorted(edges[node]):
            if state.get(nxt) == 1:
                cycles.append(" -> ".join(path[path.index(nxt):] + [node, nxt])
                              if nxt in path else f"{node} -> {nxt}")
            elif nxt not in state:
                visit(nxt, path + [node])
        state[node] = 2

    for node in sorted(edges):
        if node not in state:
            visit(node, [])
    assert cycles == [], "\n".join(cycles)


@pytest.mark.parametrize("source, expected", [
    ("from zoo.models.vit import model", {"zoo.models.vit.model"}),
    ("from zoo.training.errors import UserError", {"zoo.training.errors"}),
    ("def f():\n    from zoo.hub.loader import load", {"zoo.hub.loader"}),
    ("if TYPE_CHECKING:\n    from zoo.hub.loader import load", set()),
    # The facade, from inside the package: an edge to the top, which the level test refuses.
    ("def f():\n    import zoo", {"zoo"}),
    ("from zoo import load", {"zoo"}),
    ("from zoo import converters", {"zoo.converters"}),
])
def test_the_reader_finds_imports_anywhere(tmp_path, source, expected):
    path = tmp_path / "probe.py"
    path.write_text(source)
    assert imports_of("zoo.probe", path) == expected


def test_the_reader_resolves_relative_imports(tmp_path):
    path = tmp_path / "probe.py"
    path.write_text("from .validation import positive_int\nfrom . import attention\n")
    assert "zoo.layers.validation" in imports_of("zoo.layers.probe", path)


def _package(name: str) -> str | None:
    """Which of `FOLDERS`' packages the dotted `name` belongs to."""
    return max((p for p in FOLDERS if name == p or name.startswith(p + ".")), key=len,
               default=None)


def test_each_package_imports_its_own_modules_one_way():
    """A package imports its own modules by relative names (layers/: `from .validation
    import ...`) or by installed names (training/, zoo/: `from zoo.training.progress import
    ...`), never both."""
    styles: dict[str, dict[str, set[str]]] = {p: {"relative": set(), "absolute": set()}
                                              for p in FOLDERS}
    for name, path in MODULES.items():
        package = _package(name)
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom):
                targets = [] if node.level else [node.module]
                if node.level:
                    styles[package]["relative"].add(path.name)
            elif isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            else:
                continue
            if any(_package(target) == package for target in targets):
                styles[package]["absolute"].add(path.name)
    mixed = {package: {style: sorted(files) for style, files in found.items()}
             for package, found in styles.items() if all(found.values())}
    assert mixed == {}


def test_tests_and_benchmarks_import_the_installed_names_only():
    """`layers` and `training` are folders of the checkout, installed as `zoo.layers` and
    `zoo.training`: importing them by their folder names loads a second copy of every class
    (a Keras round trip then finds the other copy's registration)."""
    found = []
    for path in sorted([*(ROOT / "tests").rglob("*.py"), *(ROOT / "benchmarks").rglob("*.py")]):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            elif isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            else:
                continue
            found += [f"{path.relative_to(ROOT)}:{node.lineno} {name}" for name in names
                      if name.split(".")[0] in ("layers", "training")]
    assert not found, found
