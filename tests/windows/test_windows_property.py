"""Windowed results against a from-scratch reference (``reference.py``) at every logical time.

Random streams of updates ``(key, value, event time, arrival time, diff)`` with event times
out of order, records removed later, random lateness and retain, under tumbling, sliding and
session windows; the windowed records, counts, a reduce, a join and the late records are
compared with the reference at every time, on inline 1 and 3 workers and on 2 processes.

Longer run::

    TIMELYPY_EXAMPLES=2000 python -m pytest tests/windows/test_windows_property.py
"""

from __future__ import annotations

import os
from typing import Any, Dict, List

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from timelypy.testing import contents_at, run_changes
from timelypy.windows import Session, Sliding, Tumbling, windowed

from . import reference as ref

EXAMPLES = int(os.environ.get("TIMELYPY_EXAMPLES", "500"))
SETTINGS = dict(deadline=None, suppress_health_check=[HealthCheck.too_slow])

specs = st.one_of(
    st.builds(Tumbling, st.integers(1, 6), st.integers(-3, 3)),
    st.builds(
        lambda size, hop, offset: Sliding(size, hop, offset),
        st.integers(1, 8),
        st.integers(1, 5),
        st.integers(-2, 2),
    ),
    st.builds(Session, st.integers(1, 5)),
)


@st.composite
def streams(draw: Any, max_events: int = 14) -> List[ref.Update]:
    """Inserts of ``(key, (id, event time))`` arriving with disorder, some removed later."""
    n = draw(st.integers(0, max_events))
    updates: List[ref.Update] = []
    for i in range(n):
        key = draw(st.sampled_from("ab"))
        et = draw(st.integers(0, 15))
        arrival = max(0, et + draw(st.integers(-4, 6)))
        updates.append((key, (i, et), et, arrival, 1))
        if draw(st.integers(0, 3)) == 0:
            updates.append((key, (i, et), et, arrival + draw(st.integers(0, 5)), -1))
    return updates


def _event_time(value: Any) -> int:
    return value[1]


def _program(spec: Any, lateness: int, retain: Any):
    def program(left, right):
        w = windowed(left, spec, _event_time, lateness=lateness, retain=retain)
        out: Dict[str, Any] = {
            "records": w.records,
            "count": w.count(),
            "ids": w.reduce(_ids),
            "late": w.late,
        }
        if not isinstance(spec, Session):
            other = windowed(right, spec, _event_time, lateness=lateness, retain=retain)
            out["join"] = w.join(other)
        return out

    return program


def _ids(wk: Any, vals: List[Any]) -> List[Any]:
    return [(tuple((v[0], c) for v, c in vals), 1)]


def _batches(updates: List[ref.Update], length: int) -> List[Dict[Any, int]]:
    batches: List[Dict[Any, int]] = [{} for _ in range(length)]
    for key, value, _, t, d in updates:
        batch = batches[t]
        batch[(key, value)] = batch.get((key, value), 0) + d
    return [{r: d for r, d in b.items() if d} for b in batches]


def check(spec: Any, lateness: int, retain: Any, left, right, workers=1, backend="inline"):
    horizon = 40 + lateness + (retain or 0)
    out = run_changes(
        _program(spec, lateness, retain),
        {"left": _batches(left, horizon), "right": _batches(right, horizon)},
        workers=workers,
        backend=backend,
    )
    for time in range(horizon):
        got = {name: contents_at(changes, time) for name, changes in out.items()}
        recs = ref.window_records(left, spec, lateness, retain, time)
        want = {
            "records": recs,
            "count": ref.counts(recs),
            "ids": ref.reduced(recs, _ids),
            "late": ref.late(left, spec, lateness, time),
        }
        if "join" in out:
            other = ref.window_records(right, spec, lateness, retain, time)
            want["join"] = ref.joined(recs, other)
        for name in want:
            assert got[name] == want[name], (name, time, spec, lateness, retain)


cases = st.tuples(
    specs,
    st.integers(0, 3),
    st.one_of(st.none(), st.integers(0, 4)),
    streams(),
    streams(max_events=6),
)


@settings(max_examples=max(20, EXAMPLES // 5), **SETTINGS)
@given(cases)
def test_windows_match_reference_one_worker(case):
    check(*case)


@settings(max_examples=max(10, EXAMPLES // 20), **SETTINGS)
@given(cases)
def test_windows_match_reference_three_workers(case):
    check(*case, workers=3)


@pytest.mark.processes
@settings(max_examples=max(5, EXAMPLES // 50), **SETTINGS)
@given(cases)
def test_windows_match_reference_two_processes(case):
    check(*case, workers=2, backend="processes")
