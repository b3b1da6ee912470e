"""A running Datalog program: :class:`DatalogSession`, insert and remove facts, advance, read.

The incremental model: the session has a time (0 at the start; the program's own facts are
inserted at 0). ``insert`` / ``remove`` change input relations at the current time; nothing is
visible until :meth:`~DatalogSession.advance` closes the time, after which every read
(``contents``, ``changes``, ``lookup``) shows the derived relations of every fact inserted and
not removed so far, exactly (as differential dataflow maintains them: each change costs work in
proportion to what it changes, not to the whole database).

Input relations are sets, as in Soufflé: inserting a fact already present, or removing one that
is absent, changes nothing. A fact is checked against its relation's declaration
(:meth:`~.compile.Compiled.check_fact`); a bad one is refused with a
:class:`~timelypy.errors.DatalogError` naming the relation, the field, the expected type and the
value, and nothing of the call is applied.
"""

from __future__ import annotations

import os
import pathlib
from typing import (
    TYPE_CHECKING,
    Any,
    Dict,
    Iterable,
    List,
    Optional,
    Sequence,
    Set,
    Tuple,
    Union,
)

from ...errors import DatalogError, did_you_mean
from .facts import facts_files, read_delta, read_facts
from .typing_rules import check_value

if TYPE_CHECKING:
    from ...workers import DataflowSession
    from .program import Program

__all__ = ["DatalogSession", "Fact", "Change", "handle_names", "PROBE"]

Fact = Tuple[Any, ...]
Change = Tuple[Fact, int, int]

PROBE = "probe"
"""The name of the probe every observed relation of a Datalog dataflow shares."""


def handle_names(relation: str) -> Dict[str, str]:
    """The names of a relation's handles in a Datalog dataflow: ``input`` (an input relation's
    input session), ``facts`` (its capture, in durable sessions), ``capture`` and ``by_first``
    (an observed derived relation's capture and its arrangement keyed by the first field).
    Every observed relation shares the one probe :data:`PROBE`."""
    return {
        "input": f"in:{relation}",
        "facts": f"in:{relation}:facts",
        "capture": f"out:{relation}",
        "by_first": f"out:{relation}:by_first",
    }


def _sort_key(fact: Fact) -> Tuple[Tuple[int, Any], ...]:
    return tuple((0, v) if isinstance(v, (int, float)) else (1, str(v)) for v in fact)


def _time_first(change: Change) -> Tuple[Any, Fact, int]:
    return (change[1], change[0], change[2])


class DatalogSession:
    """A Datalog program running on a driver session (:meth:`.program.Program.session`).

    A context manager: leaving the block closes the session (its workers stop)."""

    def __init__(
        self,
        program: "Program",
        session: "DataflowSession",
        observed: Sequence[str],
        durable: bool = False,
    ) -> None:
        self.program = program
        self.session = session
        """The underlying :class:`~timelypy.DataflowSession` (checkpoints, statistics, ...)."""
        self.observed = list(observed)
        """The derived relations this session shows."""
        self._durable = durable
        self._facts: Dict[str, Set[Fact]] = {n: set() for n in program.inputs}
        self._contents: Dict[str, Dict[Fact, int]] = {n: {} for n in self.observed}
        self._unread: Dict[str, List[Change]] = {n: [] for n in self.observed}
        self._synced: Any = None
        if session.restored_at is not None:
            self._restore()
        else:
            for name, rows in program.facts.items():
                self._apply({name: {tuple(r): 1 for r in rows}})

    # -- lifecycle ------------------------------------------------------------------------
    def __enter__(self) -> "DatalogSession":
        return self

    def __exit__(self, kind: Any, value: Any, traceback: Any) -> None:
        if kind is None:
            self.close()
        else:
            self.session.abort()

    def close(self, timeout: Optional[float] = None) -> None:
        """Stop the workers (idempotent)."""
        self.session.close(timeout)

    @property
    def time(self) -> int:
        """The current time: changes made now become visible at the next :meth:`advance`."""
        return int(self.session.time)

    # -- changes ----------------------------------------------------------------------------
    def insert(self, relation: str, fact: Any) -> None:
        """Insert ``fact`` (a tuple, or a bare value for a relation of one field) into the
        input ``relation`` at the current time."""
        self.update_many([(relation, fact, 1)])

    def remove(self, relation: str, fact: Any) -> None:
        """Remove ``fact`` from the input ``relation`` at the current time."""
        self.update_many([(relation, fact, -1)])

    def insert_many(self, relation: str, facts: Iterable[Any]) -> int:
        """Insert every one of ``facts`` into ``relation``, all or nothing; returns how many
        were absent (and are now inserted)."""
        return self.update_many((relation, f, 1) for f in facts)

    def remove_many(self, relation: str, facts: Iterable[Any]) -> int:
        """Remove every one of ``facts`` from ``relation``, all or nothing; returns how many
        were present (and are now removed)."""
        return self.update_many((relation, f, -1) for f in facts)

    def update_many(self, changes: Iterable[Tuple[str, Any, int]]) -> int:
        """Apply ``(relation, fact, +1 or -1)`` changes, in order, all or nothing (every fact is
        checked first); returns how many changed an input relation."""
        net: Dict[str, Dict[Fact, int]] = {}
        for relation, fact, diff in changes:
            self._require_input(relation)
            if diff not in (1, -1):
                raise DatalogError(
                    f"a change of {relation} is +1 (insert) or -1 (remove), got {diff!r} "
                    f"for {fact!r}",
                    source=self.program.compiled.source,
                    relation=relation,
                )
            checked = self.program.compiled.check_fact(relation, fact)
            mine = net.setdefault(relation, {})
            present = (checked in self._facts[relation]) + mine.get(checked, 0)
            if (diff > 0) != bool(present):
                mine[checked] = mine.get(checked, 0) + diff
        return self._apply(net)

    def _apply(self, net: Dict[str, Dict[Fact, int]]) -> int:
        count = 0
        for relation, diffs in net.items():
            rows = [f for f, d in diffs.items() if d]
            if not rows:
                continue
            self.session.update_many(
                handle_names(relation)["input"], rows, [diffs[f] for f in rows]
            )
            facts = self._facts[relation]
            for fact in rows:
                (facts.add if diffs[fact] > 0 else facts.discard)(fact)
            count += len(rows)
        return count

    def _require_input(self, relation: str) -> None:
        if relation in self._facts:
            return
        if relation in self.program.relations:
            raise DatalogError(
                f"{relation} is derived by rules, not an input relation: its facts cannot be "
                f"changed (the inputs are {', '.join(self.program.inputs) or 'none'})",
                source=self.program.compiled.source,
                relation=relation,
            )
        raise DatalogError(
            f"unknown relation {relation!r}{did_you_mean(relation, self.program.relations)}",
            source=self.program.compiled.source,
            relation=relation,
        )

    def facts(self, relation: str) -> Set[Fact]:
        """The facts of the input ``relation`` now (including changes not advanced yet)."""
        self._require_input(relation)
        return set(self._facts[relation])

    def load_facts(self, directory: Union[str, "os.PathLike[str]"]) -> Dict[str, int]:
        """Insert the facts of Soufflé's ``<relation>.facts`` files in ``directory`` (as
        Soufflé's ``-F``; see :mod:`.facts`) into the input relations, all or nothing; a missing
        file means no facts. Returns the number of facts read per relation."""
        if not pathlib.Path(directory).is_dir():
            raise DatalogError(f"no facts directory {os.fspath(directory)!r}", source="")
        files = facts_files(directory, self.program.inputs, ".facts")
        read = {n: read_facts(p, self.program.relations[n]) for n, p in files.items()}
        self.update_many((n, f, 1) for n, rows in read.items() for f in rows)
        return {n: len(rows) for n, rows in read.items()}

    def load_delta(self, path: Union[str, "os.PathLike[str]"], relation: str) -> int:
        """Apply a ``.delta`` file of ``+``/``-`` lines (see :mod:`.facts`) to ``relation``,
        all or nothing; returns how many changed it."""
        self._require_input(relation)
        changes = read_delta(path, self.program.relations[relation])
        return self.update_many((relation, f, d) for f, d in changes)

    def load_dataframe(
        self, relation: str, df: Any, columns: Optional[Sequence[str]] = None
    ) -> int:
        """Insert the rows of a Spark DataFrame into ``relation``, all or nothing: its columns
        ``columns`` (default: all, in order) are the fields. The rows are read on the driver
        (``toLocalIterator``, one partition at a time) and checked like any fact; returns how
        many were absent (and are now inserted)."""
        self._require_input(relation)
        rel = self.program.relations[relation]
        names = list(columns) if columns is not None else list(df.columns)
        if len(names) != rel.arity:
            raise DatalogError(
                f"{relation} has {rel.arity} field(s) "
                f"({', '.join(f'{a}: {t}' for a, t in rel.columns)}), the DataFrame's columns "
                f"given are {names!r}",
                source=self.program.compiled.source,
                relation=relation,
            )
        rows = (tuple(row) for row in df.select(*names).toLocalIterator())
        return self.insert_many(relation, rows)

    def advance(self) -> None:
        """Close the current time: every change made so far becomes visible to the reads
        (:attr:`time` moves on by one)."""
        self.session.advance_to(self.time + 1)

    def checkpoint(self) -> Any:
        """Take a checkpoint now (the session must be opened with ``checkpoint=``; see
        ``docs/recovery.md``); returns its manifest."""
        return self.session.checkpoint()

    # -- reads ------------------------------------------------------------------------------
    def _require_observed(self, relation: str) -> None:
        if relation in self._contents:
            return
        raise DatalogError(
            f"{relation!r} is not observed by this session (it shows "
            f"{', '.join(self.observed) or 'no relation'}; open it with observe=[...] to "
            f"choose){did_you_mean(relation, self.program.relations)}",
            source=self.program.compiled.source,
            relation=relation,
        )

    def _sync(self) -> None:
        """Wait until every observed relation has passed the times before the current one and
        fold their changes into the contents."""
        now = self.session.time
        if self._synced == now or now == 0:
            return
        self.session.wait(PROBE)
        for name in self.observed:
            changes = self.session.changes(handle_names(name)["capture"])
            self._fold(name, changes)
        if self._durable:  # drained so that they do not grow; the driver has the facts
            for name in self.program.inputs:
                self.session.changes(handle_names(name)["facts"])
        self._synced = now

    def _fold(self, name: str, changes: Iterable[Change]) -> None:
        acc = self._contents[name]
        net: Dict[Tuple[Fact, int], int] = {}
        for fact, time, diff in changes:
            net[(fact, time)] = net.get((fact, time), 0) + diff
        for (fact, _time), diff in net.items():
            total = acc.get(fact, 0) + diff
            if total:
                acc[fact] = total
            else:
                acc.pop(fact, None)
        self._unread[name].extend((f, t, d) for (f, t), d in net.items() if d)

    def _restore(self) -> None:
        for name in self.program.inputs:
            for fact, _time, diff in self.session.restored(handle_names(name)["facts"]):
                if diff > 0:
                    self._facts[name].add(fact)
        for name in self.observed:
            restored = self.session.restored(handle_names(name)["capture"])
            self._fold(name, restored)
            self._unread[name].clear()
        self._synced = self.session.time

    def contents(self, relation: str) -> Set[Fact]:
        """The facts of the derived ``relation`` as of the last :meth:`advance`."""
        self._require_observed(relation)
        self._sync()
        return set(self._contents[relation])

    def changes(self, relation: str) -> List[Change]:
        """The changes of ``relation`` since the last call, as ``(fact, time, +1 or -1)``, in
        time order: the fact entered (+1) or left (-1) the relation at that time."""
        self._require_observed(relation)
        self._sync()
        out = self._unread[relation]
        self._unread[relation] = []
        try:  # a relation's fields have one type each, so its facts compare as tuples
            out.sort(key=_time_first)
        except TypeError:  # a NaN or a value of another type from a user's function
            out.sort(key=lambda c: (c[1], _sort_key(c[0]), c[2]))
        return out

    def lookup(self, relation: str, *prefix: Any) -> List[Fact]:
        """The facts of ``relation`` whose first ``len(prefix)`` fields equal ``prefix``,
        sorted: through its arrangement by the first field (one worker answers), then
        filtered by the rest of the prefix."""
        self._require_observed(relation)
        rel = self.program.relations[relation]
        if len(prefix) > rel.arity:
            raise DatalogError(
                f"lookup in {relation}: a prefix of {len(prefix)} fields, but {relation} has "
                f"{rel.arity}: {prefix!r}",
                source=self.program.compiled.source,
                relation=relation,
            )
        key = []
        for i, (value, (attr, type_)) in enumerate(zip(prefix, rel.columns)):
            problem = check_value(value, type_)
            if problem:
                raise DatalogError(
                    f"lookup in {relation}: field {i + 1} ({attr}) {problem}",
                    source=self.program.compiled.source,
                    relation=relation,
                )
            key.append(float(value) if type_ == "float" else value)
        self._sync()
        if not key:
            return sorted(self._contents[relation], key=_sort_key)
        if self.session.time == 0:
            return []
        found = self.session.lookup(handle_names(relation)["by_first"], key[0])
        want = tuple(key)
        rows = [f for f, count in found.items() if count > 0 and f[: len(want)] == want]
        return sorted(rows, key=_sort_key)
