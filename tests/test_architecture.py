"""The shape of the code, checked: layer contracts, no cycles, no private names across modules,
imports at module top, modules and folders of a readable size (docs/architecture.md)."""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "pytest_goodput"
#: Third-party modules that are optional extras (or platform-dependent): imported where used.
OPTIONAL = ("xllamacpp", "gguf", "transformers", "matplotlib", "uvloop", "ruptures", "ray", "ddsketch", "yaml")
#: The pytest entry point defers loading the core so that installing the plugin costs
#: unrelated test suites nothing (docs/architecture.md): the core (machine checks included), the harness.
LAZY_CORE = {"pytest_goodput/plugin/__init__.py"}
#: Function-level imports in the whole product: each optional dependency imported in one place,
#: and the entry point's deferred core (the core and the harness).
MAX_FUNCTION_IMPORTS = 10
#: The worker entry point imports its own module by name so pickled classes resolve to it.
SELF_IMPORT = {("pytest_goodput/load/pools/processes.py", "pytest_goodput.load.pools.processes")}
#: One concept per module (docs/architecture.md): fragments merge into their concept up to this.
MAX_LINES = 600
#: A folder holds one concept's modules; past this it splits into subpackages.
MAX_MODULES = 12


def _modules() -> list[Path]:
    return sorted(PACKAGE.rglob("*.py"))


def _rel(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _in_function_imports(tree: ast.AST) -> list[ast.stmt]:
    found: list[ast.stmt] = []

    def visit(node: ast.AST, in_fn: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                visit(child, True)
            elif isinstance(child, (ast.Import, ast.ImportFrom)) and in_fn:
                found.append(child)
            else:
                visit(child, in_fn)

    visit(tree, False)
    return found


def test_no_private_name_is_imported_across_modules() -> None:
    offenders = []
    for path in _modules():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("pytest_goodput"):
                offenders += [f"{_rel(path)}:{node.lineno} {node.module}.{a.name}"
                              for a in node.names if a.name.startswith("_") and a.name != "__version__"]
    assert offenders == []


def test_imports_inside_functions_only_for_optional_dependencies() -> None:
    offenders = []
    for path in _modules():
        if _rel(path) in LAZY_CORE:
            continue
        for node in _in_function_imports(ast.parse(path.read_text(encoding="utf-8"))):
            names = [node.module or ""] if isinstance(node, ast.ImportFrom) else [a.name for a in node.names]
            for name in names:
                if name.split(".")[0] in OPTIONAL or (_rel(path), name) in SELF_IMPORT:
                    continue
                offenders.append(f"{_rel(path)}:{node.lineno} {name}")
    assert offenders == []


def test_function_level_imports_are_few() -> None:
    found = [f"{_rel(p)}:{n.lineno}" for p in _modules()
             for n in _in_function_imports(ast.parse(p.read_text(encoding="utf-8")))]
    assert len(found) <= MAX_FUNCTION_IMPORTS, found


def test_imports_are_absolute() -> None:
    relative = [f"{_rel(p)}:{n.lineno}" for p in _modules()
                for n in ast.walk(ast.parse(p.read_text(encoding="utf-8")))
                if isinstance(n, ast.ImportFrom) and n.level]
    assert relative == []


def test_no_module_is_over_the_size_limit() -> None:
    long = {_rel(p): n for p in _modules()
            if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_LINES}
    assert long == {}


def test_no_folder_holds_more_modules_than_the_limit() -> None:
    folders = {p.parent for p in _modules()}
    crowded = {_rel(d): n for d in folders if (n := len(list(d.glob("*.py")))) > MAX_MODULES}
    assert crowded == {}


@pytest.mark.parametrize("type_only", [False, True], ids=["runtime", "with-type-checking"])
def test_no_import_cycle_between_modules(type_only: bool) -> None:
    """Not even through imports under ``TYPE_CHECKING``: a type a lower module needs from a
    higher one is a protocol of its own (``schema/scenario/spec_fields.py``)."""
    grimp = pytest.importorskip("grimp")
    graph = grimp.build_graph("pytest_goodput", exclude_type_checking_imports=not type_only)
    cycles = []
    for module in sorted(graph.modules):
        for imported in graph.find_modules_directly_imported_by(module):
            if imported != module and graph.chain_exists(importer=imported, imported=module):
                cycles.append((module, imported))
    assert cycles == []


def test_every_module_lives_in_a_layer_package() -> None:
    loose = [_rel(p) for p in PACKAGE.glob("*.py")
             if p.name not in ("__init__.py", "__main__.py", "_version.py")]
    assert loose == []


def test_layer_contracts_hold() -> None:
    lint = shutil.which("lint-imports") or str(Path(sys.executable).with_name("lint-imports"))
    if not Path(lint).exists():
        pytest.skip("import-linter is not installed (pip install -e '.[test]')")
    proc = subprocess.run([lint, "--no-cache"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert "broken" not in proc.stdout.lower().replace("0 broken", "")


@pytest.mark.parametrize("module", [p for p in sorted(PACKAGE.rglob("*.py"))
                                    if p.name != "__main__.py"], ids=_rel)
def test_every_module_says_what_it_is_for(module: Path) -> None:
    doc = ast.get_docstring(ast.parse(module.read_text(encoding="utf-8")))
    assert doc and "TODO" not in doc, f"{_module_name(module)} has no docstring"
