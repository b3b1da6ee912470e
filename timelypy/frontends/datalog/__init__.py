"""Datalog (a Soufflé-compatible subset) compiled to the plan layer and run incrementally.

>>> from timelypy import datalog
>>> program = datalog.Program.from_text('''
... .decl edge(x: number, y: number)
... .input edge
... .decl path(x: number, y: number)
... path(x, y) :- edge(x, y).
... path(x, z) :- path(x, y), edge(y, z).
... .output path
... ''')
>>> with program.session() as s:
...     s.insert_many("edge", [(1, 2), (2, 3)])
...     s.advance()
...     sorted(s.contents("path"))
...     s.remove("edge", (2, 3))
...     s.advance()
...     s.changes("path")
...     s.lookup("path", 1)
2
[(1, 2), (1, 3), (2, 3)]
[((1, 2), 0, 1), ((1, 3), 0, 1), ((2, 3), 0, 1), ((1, 3), 1, -1), ((2, 3), 1, -1)]
[(1, 2)]

See ``docs/datalog.md``.
"""

from ...errors import DatalogError
from .compile import Compiled, compile_program
from .facts import read_delta, read_facts, write_csv
from .normal import Relation
from .parser import parse
from .program import DatalogDataflow, Program
from .session import DatalogSession, handle_names

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
