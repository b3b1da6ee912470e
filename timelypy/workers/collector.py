"""Python's cyclic garbage collector while workers step.

A dataflow holds millions of small acyclic containers (the tuples and lists of its traces and
messages), and none of its operators makes cyclic garbage while it runs: reference counting frees
everything it drops. CPython's generational collector nevertheless scans every container that
survives a generation, so on large states it costs as much as the dataflow itself (the skip-level
program over 10^6 people: about 11 of 23 s in collections with raised thresholds) while finding
nothing.

So, by default, automatic collection is *paused* while workers run (``execute`` and every
backend's workers for their whole run, an in-process session while it steps). As a safety net
for cyclic garbage made by user functions, a full collection runs between steps once the number
of tracked containers has grown by :data:`MIN_GROWTH` and by :data:`GROWTH_FACTOR` times the
number alive after the previous one (an amortised O(1) scan per container; a full collection of
a large heap takes seconds, so the bound is set high). Python's own collector resumes when the
pause ends and reclaims what completed dataflows left (their operators and traces form
cycles).

``TIMELYPY_GC`` chooses: ``paused`` (the default), ``tuned`` (automatic collection with
thresholds raised to :data:`TUNED_THRESHOLDS`) or ``python`` (CPython's settings untouched).
"""

from __future__ import annotations

import contextlib
import gc
import logging
import os
from typing import Iterator

__all__ = [
    "GROWTH_FACTOR",
    "MIN_GROWTH",
    "TUNED_THRESHOLDS",
    "gc_mode",
    "maybe_collect",
    "paused_collector",
    "thaw",
]

log = logging.getLogger(__name__)

MIN_GROWTH = 50_000_000
"""Tracked containers allocated (net) since the last collection before the next one runs."""

GROWTH_FACTOR = 2
"""... and at least this many times the containers alive after the previous collection."""

TUNED_THRESHOLDS = (100_000, 50, 1000)
"""Collector thresholds in ``tuned`` mode."""

_MODES = ("paused", "tuned", "python")

_depth = 0
_was_enabled = False
_limit = MIN_GROWTH
_survivors = 0
_frozen = False


def gc_mode() -> str:
    """The collector policy from ``TIMELYPY_GC`` (``paused`` when unset); ValueError if unknown."""
    mode = os.environ.get("TIMELYPY_GC", "paused").strip().lower() or "paused"
    if mode not in _MODES:
        raise ValueError(f"TIMELYPY_GC={mode!r}: expected one of {', '.join(_MODES)}")
    return mode


def maybe_collect() -> None:
    """Between steps: run the paused collector's full collection if the heap grew enough.
    Costs one C call when nothing is due."""
    if _depth and gc.get_count()[0] > _limit:
        _collect()


def _collect() -> None:
    global _limit, _survivors
    found = gc.collect()
    _survivors = len(gc.get_objects())
    _limit = max(MIN_GROWTH, GROWTH_FACTOR * _survivors)
    log.debug(
        "collector: %d unreachable found, %d containers alive, next after %d more",
        found,
        _survivors,
        _limit,
    )


def thaw() -> None:
    """Hand the objects that :func:`paused_collector` froze back to Python's collector (an
    in-process session calls this when it closes, so that its dataflow's cycles are found)."""
    global _frozen
    if _frozen and _depth == 0:
        gc.unfreeze()
        _frozen = False


@contextlib.contextmanager
def paused_collector(freeze: bool = False) -> Iterator[None]:
    """Apply the ``TIMELYPY_GC`` policy for the duration (nestable; restored afterwards).

    ``freeze`` (an in-process session's waits): in the ``paused`` mode, before automatic
    collection resumes, move every object alive to the collector's permanent generation
    (``gc.freeze``, constant time). Python's collector then runs between the caller's calls
    over what was made since, not over the dataflow's whole state (each pass of it would scan
    the traces and find nothing). Frozen objects are still freed by reference counting;
    :func:`thaw` hands them back."""
    global _depth, _was_enabled, _limit, _frozen
    mode = gc_mode()
    if mode == "python":
        yield
        return
    if mode == "tuned":
        old = gc.get_threshold()
        gc.set_threshold(*(max(o, t) for o, t in zip(old, TUNED_THRESHOLDS)))
        try:
            yield
        finally:
            gc.set_threshold(*old)
        return
    if _depth == 0:
        _was_enabled = gc.isenabled()
        gc.disable()
        _limit = max(MIN_GROWTH, GROWTH_FACTOR * _survivors)
    _depth += 1
    try:
        yield
    finally:
        _depth -= 1
        if _depth == 0 and freeze:
            gc.freeze()
            _frozen = True
        if _depth == 0 and _was_enabled:
            gc.enable()
