"""How the user's functions travel to worker processes and Ray actors, their file names kept.

A function defined in ``__main__`` (a script, ``timelypy run``, a notebook) or in a module the
workers cannot import travels by value: cloudpickle rebuilds its code object in the worker.
Since cloudpickle 3.1 that code object's file name is replaced by ``"<dynamic-code>"`` (so that
the same function pickles to the same bytes wherever it was defined), and a worker's traceback
then shows ``File "<dynamic-code>", line 12, in <lambda>``: the line number without the file.
:func:`dumps` keeps the real file name, so a worker's traceback names the user's file and line
(and shows the line's source when the worker can read that file, as on one machine).
"""

from __future__ import annotations

import io
import types
from collections import ChainMap
from typing import Any, Callable, Optional

import cloudpickle

__all__ = ["dumps", "DYNAMIC_FILENAME"]

DYNAMIC_FILENAME = "<dynamic-code>"
"""The file name cloudpickle (3.1 and later) gives every code object it pickles by value."""


def _find_code_reduce() -> Optional[Callable[[types.CodeType], Any]]:
    """cloudpickle's reducer for code objects (a private function; None if it moved)."""
    for module in ("cloudpickle.cloudpickle", "cloudpickle.cloudpickle_fast"):
        try:
            found = getattr(__import__(module, fromlist=["_code_reduce"]), "_code_reduce", None)
        except ImportError:
            continue
        if callable(found):
            return found
    return None


_CODE_REDUCE = _find_code_reduce()


def _code_keeping_filename(code: types.CodeType) -> Any:
    """cloudpickle's reduction of ``code`` with ``co_filename`` put back."""
    rebuild, args = _CODE_REDUCE(code)[:2]  # type: ignore[misc]
    if code.co_filename != DYNAMIC_FILENAME:
        args = tuple(
            code.co_filename if isinstance(a, str) and a == DYNAMIC_FILENAME else a for a in args
        )
    return rebuild, args


class _FilenamePickler(cloudpickle.Pickler):
    """cloudpickle's pickler whose code objects keep their file name."""

    dispatch_table = ChainMap(
        {types.CodeType: _code_keeping_filename}, cloudpickle.Pickler.dispatch_table
    )


def dumps(obj: Any, protocol: Optional[int] = None) -> bytes:
    """``cloudpickle.dumps(obj)``, except that the functions pickled by value keep the file
    name of their code, so tracebacks in the workers name the user's file. The bytes load
    with plain ``cloudpickle.loads`` (or ``pickle.loads``)."""
    if _CODE_REDUCE is None:  # an unknown cloudpickle: its own behaviour
        return cloudpickle.dumps(obj, protocol=protocol)
    buffer = io.BytesIO()
    _FilenamePickler(buffer, protocol=protocol).dump(obj)
    return buffer.getvalue()
