"""Testing helpers: run a collection function over batches, check it against a from-scratch run.

Like Bytewax's ``TestingSource`` or Pathway's ``pw.debug``: no dataflow, session or probe to
write. A *program* is a function from input collections to one output ``Collection``; a
*batch* is what changes at one time: a list of records (each inserted once) or a dict
``{record: diff}`` (for removals and multiplicities). ``batches[t]`` is applied at time ``t``.

>>> from timelypy.testing import run_changes
>>> run_changes(lambda words: words.count(), [["a", "b", "a"], {"a": -1}])
{0: [(('a', 2), 1), (('b', 1), 1)], 1: [(('a', 1), 1), (('a', 2), -1)]}

Several inputs: ``batches`` is a dict of input name to batches, and the program takes the
inputs by those names (keyword arguments).

:func:`check_against_scratch` runs the program incrementally and, at every time, compares the
output's content with the program run once more from scratch on the input accumulated up to
that time as a single batch; :class:`ScratchMismatch` names the first time and record that
differ.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Dict, List, Mapping, Sequence, Tuple, Union

from .workers.sessions.session import open_session

if TYPE_CHECKING:
    from .dataflow.scope import Scope

__all__ = ["run_changes", "check_against_scratch", "contents_at", "ScratchMismatch"]

Batch = Union[Sequence[Any], Mapping[Any, int]]
Batches = Union[Sequence[Batch], Mapping[str, Sequence[Batch]]]
Changes = Dict[Any, List[Tuple[Any, int]]]

_PROBE = "__probe__"
_OUTPUT = "__output__"


class ScratchMismatch(AssertionError):
    """The incremental run and the from-scratch run differ: at ``time``, ``record`` has count
    ``incremental`` in one and ``scratch`` in the other."""

    def __init__(
        self, message: str, time: Any, record: Any, incremental: int, scratch: int
    ) -> None:
        super().__init__(message)
        self.time = time
        self.record = record
        self.incremental = incremental
        self.scratch = scratch


def _updates(batch: Batch) -> Tuple[List[Any], List[int]]:
    if isinstance(batch, Mapping):
        return list(batch), [int(d) for d in batch.values()]
    if isinstance(batch, (str, bytes)):
        raise TypeError(f"a batch is a list of records or a dict of record -> diff, not {batch!r}")
    records = list(batch)
    return records, [1] * len(records)


def _named(batches: Batches) -> Tuple[Dict[str, Sequence[Batch]], bool]:
    if isinstance(batches, Mapping):
        return {str(k): v for k, v in batches.items()}, False
    return {"input": batches}, True


def _ordered(items: List[Tuple[Any, int]]) -> List[Tuple[Any, int]]:
    try:
        return sorted(items)
    except TypeError:  # records of mixed types
        return sorted(items, key=repr)


class _Dataflow:
    """The session's dataflow: one input per name, the program, a probe and a capture per
    output."""

    def __init__(self, program: Callable[..., Any], names: Sequence[str], single: bool) -> None:
        self.program = program
        self.names = list(names)
        self.single = single

    def __call__(self, scope: Scope) -> Dict[str, Any]:
        handles, collections = {}, {}
        for name in self.names:
            handles[name], collections[name] = scope.new_collection()
        if self.single:
            out = self.program(collections[self.names[0]])
        else:
            out = self.program(**collections)
        outputs = out if isinstance(out, Mapping) else {_OUTPUT: out}
        for name, collection in outputs.items():
            if not hasattr(collection, "capture"):
                raise TypeError(
                    f"run_changes: the program returned {type(collection).__name__}"
                    f"{'' if name == _OUTPUT else f' as {name!r}'}, not a Collection"
                )
            handles[f"{_PROBE}{name}"] = collection.probe()
            handles[f"{_OUTPUT}{name}"] = collection.capture()
        return handles


def _by_time(updates: List[Tuple[Any, Any, int]]) -> Changes:
    sums: Dict[Any, Dict[Any, int]] = {}
    for data, time, diff in updates:
        at = sums.setdefault(time, {})
        at[data] = at.get(data, 0) + diff
    out: Changes = {}
    for time in sorted(sums):
        changes = [(d, n) for d, n in sums[time].items() if n]
        if changes:
            out[time] = _ordered(changes)
    return out


def run_changes(
    program: Callable[..., Any],
    batches: Batches,
    *,
    workers: int = 1,
    backend: str = "inline",
    timeout: float = 60.0,
) -> Any:
    """Run ``program`` over ``batches`` (``batches[t]`` at time ``t``) on ``workers`` workers
    of ``backend``; returns the output's changes by time: ``{time: [(record, diff), ...]}``,
    consolidated and sorted, times without changes left out. A program that returns a dict of
    collections gets a dict of those, by the same names. Every wait is bounded by ``timeout``
    seconds."""
    named, single = _named(batches)
    length = max((len(b) for b in named.values()), default=0)
    dataflow = _Dataflow(program, list(named), single)
    with open_session(dataflow, workers=workers, backend=backend, timeout=timeout) as session:
        outputs = [n[len(_OUTPUT) :] for n in session.handle_names if n.startswith(_OUTPUT)]
        for t in range(length):
            for name, seq in named.items():
                if t < len(seq):
                    records, diffs = _updates(seq[t])
                    if records:
                        session.update_many(name, records, diffs=diffs)
            session.advance_to(t + 1)
        results = {}
        for name in outputs:
            if length:
                session.wait(f"{_PROBE}{name}", timeout=timeout)
            results[name] = _by_time(session.changes(f"{_OUTPUT}{name}"))
    return results[_OUTPUT] if _OUTPUT in results else results


def contents_at(changes: Changes, time: Any) -> Dict[Any, int]:
    """The content at ``time`` (``{record: count}``) of changes by time (integer times)."""
    content: Dict[Any, int] = {}
    for t, items in changes.items():
        if t <= time:
            for record, diff in items:
                content[record] = content.get(record, 0) + diff
    return {r: n for r, n in content.items() if n}


def _accumulated(named: Dict[str, Sequence[Batch]], upto: int) -> Dict[str, List[Dict[Any, int]]]:
    out = {}
    for name, seq in named.items():
        total: Dict[Any, int] = {}
        for batch in seq[: upto + 1]:
            for record, diff in zip(*_updates(batch), strict=True):
                total[record] = total.get(record, 0) + diff
        out[name] = [{r: n for r, n in total.items() if n}]
    return out


def check_against_scratch(
    program: Callable[..., Any],
    batches: Batches,
    *,
    workers: int = 1,
    backend: str = "inline",
    timeout: float = 60.0,
    incremental: Any = None,
) -> Any:
    """Check ``program`` at every time against a from-scratch recomputation: the output's
    content at time ``t`` of the incremental run (on ``workers`` workers of ``backend``) must
    equal the output of the program run anew (one inline worker) on the input accumulated up to
    ``t``, given as a single batch (every output, for a program that returns a dict). Raises
    :class:`ScratchMismatch` at the first time and record that differ; returns the incremental
    run's changes (or checks ``incremental``, if given, instead of running)."""
    named, single = _named(batches)
    if incremental is None:
        incremental = run_changes(
            program, batches, workers=workers, backend=backend, timeout=timeout
        )
    length = max((len(b) for b in named.values()), default=0)
    for t in range(length):
        accumulated = _accumulated(named, t)
        scratch = run_changes(
            program, accumulated["input"] if single else accumulated, timeout=timeout
        )
        if _is_changes(scratch):
            _compare(t, "", contents_at(incremental, t), contents_at(scratch, 0), workers, backend)
            continue
        for name in scratch:
            _compare(
                t,
                f" of output {name!r}",
                contents_at(incremental.get(name, {}), t),
                contents_at(scratch[name], 0),
                workers,
                backend,
            )
    return incremental


def _is_changes(result: Any) -> bool:
    """Whether ``result`` is one output's changes by time (not a dict of outputs)."""
    return not any(isinstance(v, dict) for v in result.values())


def _compare(
    t: Any, what: str, got: Dict[Any, int], expected: Dict[Any, int], workers: int, backend: str
) -> None:
    for record, _ in _ordered([(r, 0) for r in set(expected) | set(got)]):
        if expected.get(record, 0) != got.get(record, 0):
            raise ScratchMismatch(
                f"at time {t}: record {record!r}{what} has count {got.get(record, 0)} in the "
                f"incremental run ({workers} worker(s), {backend}) but "
                f"{expected.get(record, 0)} from scratch",
                t,
                record,
                got.get(record, 0),
                expected.get(record, 0),
            )
