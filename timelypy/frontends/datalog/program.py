"""A Datalog program ready to run: :class:`Program`, its dataflow, and its sessions.

A program comes from text or a file; its sessions (:class:`~.session.DatalogSession`) run on
any backend.

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
2
[(1, 2), (1, 3), (2, 3)]
"""

from __future__ import annotations

import os
import pathlib
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple, Union

from ...errors import DatalogError, did_you_mean
from ...plan import Plan, lower
from ...workers import open_session
from .compile import Compiled, compile_program
from .normal import Relation
from .session import PROBE, DatalogSession, handle_names

__all__ = ["Program", "DatalogDataflow"]


def _first_field(fact: Tuple[Any, ...]) -> Tuple[Any, Tuple[Any, ...]]:
    return (fact[0] if fact else (), fact)


class DatalogDataflow:
    """The dataflow of a program, as ``open_session`` and ``Worker.dataflow`` take it: called
    with a scope on every worker. Holds only plans and names (it travels to worker processes).

    One input collection per input relation; the lowered plan of every observed relation
    (:func:`timelypy.plan.lower`: shared sub-plans built once), each captured, probed (one
    shared probe) and arranged by its first field for lookups; with ``durable``, every input
    relation is captured too (a restored session rebuilds its facts from it)."""

    def __init__(
        self, plans: Mapping[str, Plan], inputs: Sequence[str], durable: bool = False
    ) -> None:
        self.plans = dict(plans)
        self.inputs = list(inputs)
        self.durable = durable

    def __call__(self, scope: Any) -> Dict[str, Any]:
        handles: Dict[str, Any] = {}
        collections = {}
        for name in self.inputs:
            names = handle_names(name)
            handles[names["input"]], collections[name] = scope.new_collection(names["input"])
            if self.durable:
                handles[names["facts"]] = collections[name].capture()
        built = lower(self.plans, collections)
        probe = None
        for name in self.plans:
            names = handle_names(name)
            relation = built[name]
            handles[names["capture"]] = relation.capture()
            if probe is None:
                probe = relation.probe()
            else:
                relation.probe_with(probe)
            handles[names["by_first"]] = relation.map(_first_field).arrange_by_key(
                names["by_first"]
            )
        if probe is None:  # nothing observed: the inputs alone say when a time is done
            for name in self.inputs:
                collection = collections[name]
                if probe is None:
                    probe = collection.probe()
                else:
                    collection.probe_with(probe)
        if probe is not None:
            handles[PROBE] = probe
        return handles


class Program:
    """A compiled Datalog program (:func:`~.compile.compile_program`) and how to run it."""

    def __init__(self, compiled: Compiled) -> None:
        self.compiled = compiled

    @classmethod
    def from_text(cls, text: str, source: str = "<program>") -> "Program":
        """Parse, check and compile ``text`` (:class:`~timelypy.errors.DatalogError` if it is
        wrong; ``source`` names it in errors)."""
        return cls(compile_program(text, source))

    @classmethod
    def from_file(cls, path: Union[str, "os.PathLike[str]"]) -> "Program":
        """:meth:`from_text` of a ``.dl`` file, errors naming the file."""
        try:
            text = pathlib.Path(path).read_text(encoding="utf-8")
        except OSError as exc:
            raise DatalogError(
                f"cannot read the program: {exc.strerror or exc}", source=os.fspath(path)
            ) from None
        return cls.from_text(text, os.fspath(path))

    @property
    def relations(self) -> Dict[str, Relation]:
        """Every declared relation, in declaration order."""
        return self.compiled.relations

    @property
    def inputs(self) -> List[str]:
        """The input relations (``.input``, and relations with facts in the text)."""
        return self.compiled.inputs

    @property
    def outputs(self) -> List[str]:
        """The ``.output`` relations."""
        return self.compiled.outputs

    @property
    def derived(self) -> List[str]:
        """The relations computed by rules (each has a plan)."""
        return list(self.compiled.plans)

    @property
    def plans(self) -> Dict[str, Plan]:
        """Every derived relation's plan (:mod:`timelypy.plan`)."""
        return self.compiled.plans

    @property
    def facts(self) -> Dict[str, List[Tuple[Any, ...]]]:
        """The facts written in the program text, per relation."""
        return self.compiled.facts

    def observable(self, observe: Optional[Sequence[str]] = None) -> List[str]:
        """The derived relations a session shows: ``observe`` (checked), else the outputs if
        the program has any, else every derived relation."""
        if observe is None:
            chosen = [n for n in self.outputs if n in self.compiled.plans]
            return chosen if self.outputs else self.derived
        chosen = []
        for name in observe:
            if name not in self.compiled.plans:
                kind = "an input relation" if name in self.relations else "not declared"
                raise DatalogError(
                    f"cannot observe {name!r}: it is {kind}; the derived relations are "
                    f"{', '.join(self.derived) or 'none'}"
                    f"{did_you_mean(name, self.derived) if kind != 'an input relation' else ''}",
                    source=self.compiled.source,
                    relation=name,
                )
            chosen.append(name)
        return list(dict.fromkeys(chosen))

    def dataflow(
        self, observe: Optional[Sequence[str]] = None, durable: bool = False
    ) -> DatalogDataflow:
        """The program's dataflow for ``open_session`` / ``Worker.dataflow``: call it with a
        scope for the dict of handles (see :func:`handle_names`). ``observe`` chooses the
        derived relations to capture and arrange (default: :meth:`observable`)."""
        observed = self.observable(observe)
        return DatalogDataflow(
            {n: self.compiled.plans[n] for n in observed}, self.compiled.inputs, durable
        )

    def session(
        self,
        workers: Optional[int] = None,
        backend: Optional[str] = None,
        *,
        timeout: float = 60.0,
        observe: Optional[Sequence[str]] = None,
        checkpoint: Any = None,
        restore: Any = None,
        **options: Any,
    ) -> DatalogSession:
        """Run the program on ``workers`` workers of ``backend`` (as
        :func:`timelypy.open_session`, whose ``timeout``, ``checkpoint``, ``restore`` and
        backend ``options`` it passes on) and return a :class:`~.session.DatalogSession`.
        The program's own facts are inserted at time 0 (not again on restore)."""
        observed = self.observable(observe)
        durable = checkpoint is not None or restore is not None
        session = open_session(
            self.dataflow(observed, durable),
            workers=workers,
            backend=backend,
            timeout=timeout,
            checkpoint=checkpoint,
            restore=restore,
            **options,
        )
        try:
            return DatalogSession(self, session, observed, durable)
        except BaseException:
            session.abort()
            raise

