"""How another implementation of the hot loops drops in behind their names.

The engine's hot loops live in *kernel modules*: ``timelypy.progress.kernel`` (change-batch and
antichain updates) and the modules of ``timelypy.differential.kernel`` (grouping, consolidation,
merging, the join kernel, the flat histories of reduce). Each is pure Python, states one contract
in its docstring, and lists its kernels in ``__all__``. Operators call kernels only by those names.

An alternative implementation (compiled with Cython, mypyc or PyO3, or a deliberately plain one
that the tests run the property suite against) is a package whose modules mirror the kernel
modules' paths below ``timelypy``: for ``timelypy.differential.kernel.merge`` it is
``PACKAGE.differential.kernel.merge``. Setting the environment variable ``TIMELYPY_KERNELS`` to
``PACKAGE`` before timelypy is imported makes every kernel module take, from its mirror, each name
of its ``__all__`` that the mirror defines; names the mirror lacks, and kernel modules without a
mirror, keep the pure-Python code. Nothing is chosen per call: the choice is made once, at import,
so a kernel costs what a plain function call costs.

Example::

    TIMELYPY_KERNELS=mykernels python -c "import timelypy.kernels as k, timelypy; print(k.chosen())"

A compiled mirror is one command away: :func:`compile_kernels` (``timelypy compile-kernels
DIR``) copies every kernel module into ``DIR/timelypy_compiled`` and compiles the copies with
mypyc (it comes with mypy; it needs a C compiler and Python's headers), so the kernels run as C
extension functions with the same code and the same contracts. Each compiled module records
the SHA-256 of the source it was made from, and :func:`adopt` refuses a mirror made from other
sources (a stale build after an upgrade or an edit): rebuild it.

Code that is fastest in the interpreter is not always fastest compiled (``zip`` over ``islice``
iterates in C for the interpreter; mypyc makes an index loop over a list of ints into unboxed
compares). A kernel module may therefore hold both: it sets ``COMPILED = False`` at module level
and keeps definitions written for the compiler under ``if COMPILED:``. The compiled copy sets
the flag to ``True`` and mypyc is told that it is always true, so each build runs the code written
for it; the tests hold both to the same contracts.
"""

from __future__ import annotations

import ast
import hashlib
import importlib
import importlib.machinery
import os
import subprocess
import sys
from pathlib import Path
from typing import Any, Dict, List, MutableMapping, Optional, Set

__all__ = [
    "COMPILED_PACKAGE",
    "ENVIRONMENT_VARIABLE",
    "KernelBuildError",
    "adopt",
    "chosen",
    "compile_kernels",
    "kernel_modules",
]

ENVIRONMENT_VARIABLE = "TIMELYPY_KERNELS"

COMPILED_PACKAGE = "timelypy_compiled"
"""The package name :func:`compile_kernels` gives its mirror unless told otherwise."""

_SOURCE_HASH = "KERNEL_SOURCE_SHA256"
"""The constant each compiled mirror module holds: the SHA-256 of its kernel module's source."""

_PACKAGE_ROOT = Path(__file__).resolve().parent

_COMPILED_FLAG = "COMPILED"
"""A kernel module's ``COMPILED = False`` is ``True`` in its compiled copy, and mypyc takes
``if COMPILED:`` branches as always true: a module keeps there the definitions written for the
compiler (index loops over lists of ints, say) beside those written for the interpreter."""

# kernel module name -> the module its kernels came from (itself when nothing was adopted)
_CHOSEN: Dict[str, str] = {}


def adopt(module_name: str, namespace: MutableMapping[str, Any]) -> str:
    """Replace the kernels of ``module_name`` by those of its mirror in ``TIMELYPY_KERNELS``.

    Called once at the bottom of each kernel module as ``adopt(__name__, globals())``. Returns
    the name of the module the kernels now come from. A mirror that exists but fails to import
    raises (a broken drop-in must not silently fall back); a mirror that does not exist keeps the
    pure-Python kernels.
    """
    package = os.environ.get(ENVIRONMENT_VARIABLE, "").strip()
    source = module_name
    if package:
        try:
            importlib.import_module(package)
        except ImportError as error:
            raise ImportError(
                f"{ENVIRONMENT_VARIABLE}={package!r}: cannot import the kernel package ({error})"
            ) from error
        if not module_name.startswith("timelypy."):
            raise ValueError(f"adopt: {module_name!r} is not a timelypy module")
        mirror_name = package + module_name[len("timelypy") :]
        try:
            mirror = importlib.import_module(mirror_name)
        except ModuleNotFoundError as error:
            if error.name is None or not mirror_name.startswith(error.name):
                raise
            mirror = None
        if mirror is not None:
            _check_fresh(mirror, namespace)
            taken = [name for name in namespace.get("__all__", ()) if hasattr(mirror, name)]
            for name in taken:
                namespace[name] = getattr(mirror, name)
            if taken:
                source = mirror_name
    _CHOSEN[module_name] = source
    return source


def chosen() -> Dict[str, str]:
    """Each kernel module imported so far, and the module its kernels come from."""
    return dict(_CHOSEN)


class KernelBuildError(RuntimeError):
    """:func:`compile_kernels` could not build the mirror (the compiler's output says why)."""


def _check_fresh(mirror: Any, namespace: MutableMapping[str, Any]) -> None:
    """ImportError if ``mirror`` was compiled from another source than the kernel module's
    (a mirror that records no source, such as the plain twins, is taken as it is)."""
    recorded = getattr(mirror, _SOURCE_HASH, None)
    path = namespace.get("__file__")
    if recorded is None or not path:
        return
    try:
        current = hashlib.sha256(Path(path).read_bytes()).hexdigest()
    except OSError:
        return
    if recorded != current:
        raise ImportError(
            f"{ENVIRONMENT_VARIABLE}: {mirror.__name__} was compiled from another version of "
            f"{namespace.get('__name__')} ({path}); rebuild it (timelypy compile-kernels DIR) "
            f"or unset {ENVIRONMENT_VARIABLE}"
        )


def kernel_modules() -> List[str]:
    """The kernel modules of the installed package: every module whose source ends by adopting
    its mirror (``adopt(__name__, globals())``), as dotted names, sorted.

    Example: ``"timelypy.differential.kernel.merge" in kernel_modules()`` is True."""
    found = []
    for path in sorted(_PACKAGE_ROOT.rglob("*.py")):
        if path == Path(__file__).resolve():
            continue
        if "\nadopt(__name__, globals())" in path.read_text(encoding="utf-8"):
            parts = path.relative_to(_PACKAGE_ROOT.parent).with_suffix("").parts
            found.append(".".join(parts))
    return found


def _with_kernel_imports(names: List[str]) -> List[str]:
    """``names`` and, transitively, the kernel modules they import (mypyc compiles a module
    together with the modules it imports from the same mirror, or fails)."""
    kernels = set(kernel_modules())
    wanted = list(dict.fromkeys(names))
    for name in wanted:  # (grows while it is walked)
        if name not in kernels:
            continue
        path = _PACKAGE_ROOT.joinpath(*name.split(".")[1:]).with_suffix(".py")
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.ImportFrom):
                continue
            base = name.split(".")[: -node.level] if node.level else []
            stem = ".".join(base + ([node.module] if node.module else []))
            for found in [stem, *(f"{stem}.{alias.name}" for alias in node.names)]:
                if found in kernels and found not in wanted:
                    wanted.append(found)
    return wanted


def _is_compiled_flag(node: ast.stmt) -> bool:
    """Whether ``node`` is a kernel module's one-line ``COMPILED = False``."""
    return (
        isinstance(node, ast.Assign)
        and len(node.targets) == 1
        and isinstance(node.targets[0], ast.Name)
        and node.targets[0].id == _COMPILED_FLAG
        and node.lineno == node.end_lineno
    )


def _mirror_source(path: Path) -> str:
    """The source of the kernel module at ``path`` without its adoption (the import of
    :func:`adopt` and the call), its ``COMPILED`` flag set, with the SHA-256 of the original
    recorded."""
    text = path.read_text(encoding="utf-8")
    lines = text.splitlines(keepends=True)
    drop: Set[int] = set()
    for node in ast.parse(text).body:
        adopting = (isinstance(node, ast.ImportFrom) and node.module == "timelypy.kernels") or (
            isinstance(node, ast.Expr)
            and isinstance(node.value, ast.Call)
            and isinstance(node.value.func, ast.Name)
            and node.value.func.id == "adopt"
        )
        if adopting:
            drop.update(range(node.lineno - 1, (node.end_lineno or node.lineno)))
        elif _is_compiled_flag(node):
            lines[node.lineno - 1] = f"{_COMPILED_FLAG} = True\n"
    kept = "".join(line for i, line in enumerate(lines) if i not in drop)
    digest = hashlib.sha256(text.encode("utf-8")).hexdigest()
    return f'{kept.rstrip()}\n\n{_SOURCE_HASH} = "{digest}"\n'


def compile_kernels(
    directory: "os.PathLike[str] | str",
    package: str = COMPILED_PACKAGE,
    modules: Optional[List[str]] = None,
    timeout: float = 900.0,
) -> List[str]:
    """Compile a mirror of the kernel modules (default: :func:`kernel_modules`; a list given is
    completed with the kernel modules its modules import) with mypyc into
    ``directory/package``; returns the mirror's module names. Use it by putting ``directory``
    on ``PYTHONPATH`` and setting ``TIMELYPY_KERNELS=package`` before timelypy is imported.
    Raises :class:`KernelBuildError` when mypyc is missing, fails or takes over ``timeout``
    seconds.

    Example: ``compile_kernels("/opt/tp")``, then ``PYTHONPATH=/opt/tp
    TIMELYPY_KERNELS=timelypy_compiled python job.py``."""
    if not package.isidentifier():
        raise ValueError(f"compile_kernels: {package!r} is not a package name")
    root = Path(directory).resolve()
    names = kernel_modules() if modules is None else list(modules)
    for name in names:
        if not name.startswith("timelypy."):
            raise ValueError(f"compile_kernels: {name!r} is not a timelypy module")
    names = _with_kernel_imports(names)
    sources = []
    for name in names:
        relative = Path(*name.split(".")[1:]).with_suffix(".py")
        target = root / package / relative
        for folder in [root / package, *(root / package / p for p in relative.parents)]:
            folder.mkdir(parents=True, exist_ok=True)
            init = folder / "__init__.py"
            if not init.exists():
                init.write_text('"""A compiled mirror of timelypy\'s kernel modules."""\n')
        target.write_text(_mirror_source(_PACKAGE_ROOT / relative), encoding="utf-8")
        sources.append(str(target.relative_to(root)))
    command = [
        sys.executable,
        "-m",
        "mypyc",
        "--ignore-missing-imports",
        f"--always-true={_COMPILED_FLAG}",
        *sources,
    ]
    try:
        done = subprocess.run(
            command, cwd=root, capture_output=True, text=True, timeout=timeout, check=False
        )
    except subprocess.TimeoutExpired as error:
        raise KernelBuildError(f"compile_kernels: mypyc took over {timeout:g} s") from error
    if done.returncode != 0:
        raise KernelBuildError(
            f"compile_kernels: mypyc failed (exit {done.returncode}; it comes with mypy and "
            f"needs a C compiler):\n{(done.stdout + done.stderr)[-4000:]}"
        )
    mirrors = [package + name[len("timelypy") :] for name in names]
    for name, source in zip(mirrors, sources):
        built = Path(root / source).with_suffix("")
        if not any(
            built.with_name(built.name + s).exists() for s in importlib.machinery.EXTENSION_SUFFIXES
        ):
            raise KernelBuildError(f"compile_kernels: mypyc built no extension for {name}")
    return mirrors
