"""The two paths of the engine's arrangements in the property suite: columns and objects.

``TIMELYPY_COLUMNS`` chooses the path of fixed-width records: ``auto`` (numpy columns where the
records fit, the default) or ``off`` (every batch a dictionary of Python objects). Both must
give identical answers, so the property suite runs over both without running twice: each
example draws its mode (:func:`~support.strategies.program_and_script` gives a :class:`Script`
that names it), half of the examples each, and the harness sets it *inside each worker's build
function* (:func:`columns_mode`). Worker processes are forked from a server process started
once per test session, so they keep the environment it had then: a variable the test process
sets afterwards does not reach them.

Each run records how its arrangements went (:class:`Usage`, from :func:`column_use`, read in
the workers before the dataflow completes and drops its traces) in :data:`USAGE`, so tests can
assert that the column path was really taken, and that ``off`` really turned it off on every
backend.
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass
from typing import Any, Iterable, Iterator, List, Optional

from timelypy.differential import arrange_columns
from timelypy.differential import join as join_operator
from timelypy.differential.kernel import columns as column_kernel
from timelypy.differential.reduce import column_count
from timelypy.differential.trace.layout import COLUMNS_VARIABLE

MODES = ("auto", "off")
"""The values of ``TIMELYPY_COLUMNS`` the suite runs in."""


class Script(list):
    """A driver script (a list of actions, see ``strategies.update_streams``) that names the
    ``TIMELYPY_COLUMNS`` mode it runs in (``columns``)."""

    def __init__(self, actions: Iterable[tuple], columns: str) -> None:
        super().__init__(actions)
        if columns not in MODES:
            raise ValueError(f"columns={columns!r}: expected one of {MODES}")
        self.columns = columns

    def __repr__(self) -> str:
        return f"Script({list.__repr__(self)}, columns={self.columns!r})"

    def __reduce__(self) -> Any:
        return (Script, (list(self), self.columns))


def mode_of(script: Any) -> Optional[str]:
    """The mode a script names, or None (a plain list: the environment's mode)."""
    return getattr(script, "columns", None)


MIN_UPDATES = 1
"""The fewest pending updates the arrange operator seals as columns in ``auto`` runs of the
suite. The engine's own threshold (``arrange_columns.COLUMNS_MIN_UPDATES``) keeps small batches
on the object path for speed; the suite's batches are small, and the column path must be right
at every size, so runs in ``auto`` lower it (see :func:`columns_mode`)."""

ENCODE_CHUNK = 3
"""The waiting updates the arrange operator encodes into columns at a time in ``auto`` runs of
the suite (the engine's ``arrange_columns.ENCODE_CHUNK`` is tens of thousands): updates held
as columns across several steps, split at the frontier and turned back into tuples by a
checkpoint, at the suite's sizes."""

MERGE_RANGE_ROWS = 4
"""The updates above which the column kernel merges range by range in ``auto`` runs of the
suite (the engine's ``kernel.columns.MERGE_RANGE_ROWS`` is tens of thousands): the seals of
several chunks and the spine's merges cut into ranges at the suite's sizes."""


@contextlib.contextmanager
def columns_mode(mode: Optional[str]) -> Iterator[None]:
    """Run with ``TIMELYPY_COLUMNS=mode`` (None: as it is), and in ``auto`` with batches of
    :data:`MIN_UPDATES` sealed as columns, putting the old settings back.

    A no-op for what is already so: inline workers are threads of one process, whose builds
    overlap, so the caller sets the mode around all of them (else the first build to finish
    would put back a value the others still run in)."""
    if mode is None:
        yield
        return
    with contextlib.ExitStack() as stack:
        stack.enter_context(_environment(mode))
        if mode == "auto":
            stack.enter_context(_min_updates(MIN_UPDATES, ENCODE_CHUNK))
        yield


@contextlib.contextmanager
def _environment(mode: str) -> Iterator[None]:
    saved = os.environ.get(COLUMNS_VARIABLE)
    if saved == mode:
        yield
        return
    os.environ[COLUMNS_VARIABLE] = mode
    try:
        yield
    finally:
        if saved is None:
            os.environ.pop(COLUMNS_VARIABLE, None)
        else:
            os.environ[COLUMNS_VARIABLE] = saved


@contextlib.contextmanager
def _min_updates(least: int, chunk: int) -> Iterator[None]:
    """Also the fewest matched pairs a join consolidates before building records, and the
    fewest updates (in all, and per time) a count, distinct or threshold sums as columns:
    ``least``."""
    modules = (
        (arrange_columns, "COLUMNS_MIN_UPDATES", least),
        (arrange_columns, "ENCODE_CHUNK", chunk),
        (join_operator, "CONSOLIDATE_PAIRS_MIN", least),
        (column_count, "COLUMNS_MIN_UPDATES", least),
        (column_count, "COLUMNS_PER_TIME", least),
        (column_kernel, "MERGE_RANGE_ROWS", MERGE_RANGE_ROWS),
    )
    saved = [getattr(module, name) for module, name, _ in modules]
    if saved == [value for _, _, value in modules]:
        yield
        return
    for module, name, value in modules:
        setattr(module, name, value)
    try:
        yield
    finally:
        for (module, name, _), value in zip(modules, saved):
            setattr(module, name, value)


@dataclass
class Usage:
    """How one worker's arrangements of totally ordered times went in one run.

    ``arrangements``: how many there are; ``sealed_columns`` / ``sealed_objects``: the batches
    they sealed as columns / as objects in the whole run; ``column_batches``: the column
    batches stored in kept arrangements (traces) when the script ended, before the inputs
    closed and the dataflow completed (dropping its traces).
    """

    mode: Optional[str]
    arrangements: int = 0
    sealed_columns: int = 0
    sealed_objects: int = 0
    column_batches: int = 0

    def add(self, other: "Usage") -> None:
        """Add ``other``'s counts (another worker's) to these."""
        self.arrangements += other.arrangements
        self.sealed_columns += other.sealed_columns
        self.sealed_objects += other.sealed_objects
        self.column_batches += other.column_batches


USAGE: List[Usage] = []
"""The usage of every harness run in this process (all workers of a run added up), in order."""


def column_use(scope: Any, mode: Optional[str]) -> Usage:
    """The :class:`Usage` of the arrange operators of a built dataflow (its root ``scope``;
    operators in nested scopes have partially ordered times and no column path)."""
    usage = Usage(mode)
    for op in scope.subgraph.children[1:]:
        choice = getattr(op, "columns", None)
        if choice is None or not hasattr(choice, "sealed_columns"):
            continue
        usage.arrangements += 1
        usage.sealed_columns += choice.sealed_columns
        usage.sealed_objects += choice.sealed_objects
        if op.writer.store:
            usage.column_batches += op.spine.column_batches()
    return usage


def pairs_session(schema: Any = None) -> Any:
    """``(worker, session, captured, probe)`` of a driver-stepped worker with one input named
    ``"pairs"`` (declared with ``schema``), captured and probed: the column inputs' tests."""
    import timelypy as tp

    def flow(scope: Any) -> Any:
        pairs_in, pairs = scope.new_collection("pairs", schema=schema)
        return pairs_in, pairs.capture(), pairs.probe()

    worker = tp.Worker()
    pairs_in, captured, probe = worker.dataflow(flow)
    return worker, pairs_in, captured, probe
