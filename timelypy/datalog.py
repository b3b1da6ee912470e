"""``timelypy.datalog``: incremental Datalog (a Soufflé-compatible subset) on the engine.

The same names as :mod:`timelypy.frontends.datalog`, so that ``import timelypy.datalog`` and
``from timelypy import datalog`` both work. See ``docs/datalog.md``.
"""

from .frontends.datalog import (
    Compiled,
    DatalogDataflow,
    DatalogError,
    DatalogSession,
    Program,
    Relation,
    compile_program,
    handle_names,
    parse,
    read_delta,
    read_facts,
    write_csv,
)

__all__ = [
    "Compiled",
    "DatalogDataflow",
    "DatalogError",
    "DatalogSession",
    "Program",
    "Relation",
    "compile_program",
    "handle_names",
    "parse",
    "read_delta",
    "read_facts",
    "write_csv",
]
