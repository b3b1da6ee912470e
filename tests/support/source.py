"""The package read as source: its modules, their syntax trees and their imports.

One home for the machinery of the architecture tests (``tests/house/``): module names and paths,
parsed trees (each file read once), the nodes that run (``if TYPE_CHECKING:`` blocks left out),
and what an import statement refers to.
"""

from __future__ import annotations

import ast
import functools
import pathlib
from typing import Dict, Iterator, List, Set

from support.paths import PACKAGE


def modules(root: pathlib.Path = PACKAGE, prefix: str = "timelypy") -> Dict[str, pathlib.Path]:
    """``{dotted module name: path}`` for every ``.py`` file under ``root`` (a package is named
    by its ``__init__.py``); names start with ``prefix``."""
    out = {}
    for path in sorted(root.rglob("*.py")):
        parts = [prefix] + list(path.relative_to(root).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


MODULES = modules()
"""Every module of ``timelypy``."""


@functools.lru_cache(maxsize=None)
def tree(path: pathlib.Path) -> ast.Module:
    """The syntax tree of ``path`` (parsed once per test process)."""
    return ast.parse(path.read_text())


def is_type_checking(node: ast.If) -> bool:
    """``if TYPE_CHECKING:`` or ``if typing.TYPE_CHECKING:``."""
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def walk_runtime(root: ast.AST) -> Iterator[ast.AST]:
    """Every node under ``root``, except those under ``if TYPE_CHECKING:`` (their ``else``
    branches are kept)."""
    stack = [root]
    while stack:
        node = stack.pop()
        yield node
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and is_type_checking(child):
                stack.extend(child.orelse)
                continue
            stack.append(child)


def import_base(module: str, is_package: bool, node: ast.ImportFrom) -> str:
    """The absolute module ``node`` imports from (``from ..x import y`` in ``a.b.c`` is
    ``a.x``)."""
    if node.level == 0:
        return node.module or ""
    parts = module.split(".")
    if not is_package:
        parts = parts[:-1]
    parts = parts[: len(parts) - (node.level - 1)]
    return ".".join(parts + ([node.module] if node.module else []))


def import_targets(
    module: str, is_package: bool, node: ast.ImportFrom, with_packages: bool = False
) -> List[str]:
    """The modules ``node`` (in ``module``) loads: each imported name that is a module of
    :data:`MODULES` is that module, any other name is the module it comes from. With
    ``with_packages``, ``from a.b import c`` (``c`` a module) also counts the package ``a.b``
    (whose ``__init__`` runs first); ``from . import c`` never counts the package's own code."""
    base = import_base(module, is_package, node)
    out = []
    for alias in node.names:
        candidate = f"{base}.{alias.name}"
        if candidate in MODULES:
            out.append(candidate)
            if with_packages and (node.module or node.level == 0):
                out.append(base)
        else:
            out.append(base)
    return out


def imports(module: str, runtime_only: bool = True, with_packages: bool = False) -> Set[str]:
    """The ``timelypy`` modules ``module`` imports (function-local imports too; those under
    ``if TYPE_CHECKING:`` only if not ``runtime_only``), itself left out."""
    return imports_in(module, tree(MODULES[module]), runtime_only, with_packages)


def imports_in(
    module: str, root: ast.AST, runtime_only: bool = True, with_packages: bool = False
) -> Set[str]:
    """:func:`imports` of the source ``root`` read as ``module``'s."""
    is_package = MODULES[module].name == "__init__.py"
    nodes = walk_runtime(root) if runtime_only else ast.walk(root)
    found: Set[str] = set()
    for node in nodes:
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            found.update(import_targets(module, is_package, node, with_packages))
    return {m for m in found if m in MODULES and m != module}
