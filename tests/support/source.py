"""The package read as source: its modules, their syntax trees and their imports.

One home for the machinery of the architecture tests (``tests/house/``): module names and paths,
parsed trees (each file read once), the nodes that run (``if TYPE_CHECKING:`` blocks left out),
and what an import statement refers to.
"""

from __future__ import annotations

import ast
import functools
import pathlib
from typing import Callable, Collection, Dict, Iterator, List, Optional, Set

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


def defined_privates(module: str) -> Set[str]:
    """Underscore names ``module`` defines: functions, classes, attributes it assigns on self or
    cls, names it binds (``as`` names of imports too), class attributes and ``__slots__``
    entries."""
    names: Set[str] = set()
    for n in ast.walk(tree(MODULES[module])):
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(n.name)
        elif (
            isinstance(n, ast.Attribute)
            and isinstance(n.ctx, ast.Store)
            and isinstance(n.value, ast.Name)
            and n.value.id in ("self", "cls")
        ):
            names.add(n.attr)
        elif isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store):
            names.add(n.id)
        elif isinstance(n, ast.alias) and n.asname:
            names.add(n.asname)  # ``from bisect import bisect_left as _bisect_left``
        elif isinstance(n, ast.Constant) and isinstance(n.value, str):
            names.add(n.value)  # __slots__ entries
    return {x for x in names if x.startswith("_") and not x.startswith("__")}


def private_owners() -> Dict[str, Set[str]]:
    """``{private name: the modules that define it}``."""
    owners: Dict[str, Set[str]] = {}
    for m in MODULES:
        for name in defined_privates(m):
            owners.setdefault(name, set()).add(m)
    return owners


def _is_private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def private_reaches(
    module: str,
    layer: Callable[[str], str],
    owners: Dict[str, Set[str]],
    external: Collection[str],
    root: Optional[ast.AST] = None,
) -> List[str]:
    """Every reach of ``module`` (or of the source ``root`` read as ``module``'s) into the
    private names of another ``layer``, as ``"module: what"``: ``from x import _name`` from
    another layer, and ``o._name`` or ``getattr``/``hasattr``/``setattr``/``delattr(o,
    "_name")`` (``o`` not self or cls) of a name that is not ``module``'s own and that no module
    of its layer defines, or that a module of another layer it imports (even for type checking
    only) defines too. Names in ``external`` are other libraries' and pass."""
    is_package = MODULES[module].name == "__init__.py"
    if root is None:
        root = tree(MODULES[module])
    imported = imports_in(module, root, runtime_only=False)

    def reaches(name: str) -> bool:
        found = owners.get(name, set())
        if name in external or module in found:
            return False
        mine = {o for o in found if layer(o) == layer(module)}
        return not mine or any(layer(o) != layer(module) and o in imported for o in found)

    out = []
    for n in ast.walk(root):
        if isinstance(n, ast.ImportFrom):
            base = import_base(module, is_package, n)
            if base in MODULES and layer(base) != layer(module):
                out += [
                    f"{module}: from {base} import {a.name}" for a in n.names if _is_private(a.name)
                ]
        elif isinstance(n, ast.Attribute):
            plain = not (isinstance(n.value, ast.Name) and n.value.id in ("self", "cls"))
            if plain and _is_private(n.attr) and reaches(n.attr):
                out.append(f"{module}: {ast.unparse(n)}")
        elif (
            isinstance(n, ast.Call)
            and isinstance(n.func, ast.Name)
            and n.func.id in ("getattr", "hasattr", "setattr", "delattr")
            and len(n.args) >= 2
            and isinstance(n.args[1], ast.Constant)
            and isinstance(n.args[1].value, str)
        ):
            if _is_private(n.args[1].value) and reaches(n.args[1].value):
                out.append(f"{module}: {ast.unparse(n)}")
    return out


def module_lengths() -> Dict[str, int]:
    """``{module: lines}``."""
    return {m: len(path.read_text().splitlines()) for m, path in MODULES.items()}


def function_lengths() -> Dict[str, int]:
    """``{module.function: lines of code}`` for every function and method (a method is named by
    its module and its own name; the docstring is not code). The longest wins a repeated name."""
    out: Dict[str, int] = {}
    for m, path in MODULES.items():
        for n in ast.walk(tree(path)):
            if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)):
                assert n.end_lineno is not None
                length = n.end_lineno - n.lineno + 1
                first = n.body[0]
                if (
                    isinstance(first, ast.Expr)
                    and isinstance(first.value, ast.Constant)
                    and isinstance(first.value.value, str)
                    and first.end_lineno is not None
                ):
                    length -= first.end_lineno - first.lineno + 1
                name = f"{m}.{n.name}"
                out[name] = max(length, out.get(name, 0))
    return out
