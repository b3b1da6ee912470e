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
"""

from __future__ import annotations

import importlib
import os
from typing import Any, Dict, MutableMapping

__all__ = ["ENVIRONMENT_VARIABLE", "adopt", "chosen"]

ENVIRONMENT_VARIABLE = "TIMELYPY_KERNELS"

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
