"""DataflowSession.update_many: the bulk form of update, all or nothing, routed like update."""

from __future__ import annotations

import pytest

import timelypy as tp
from timelypy.errors import SessionInputError


def _flow(scope):
    numbers_in, numbers = scope.new_collection()
    stamps_in, stamps = scope.new_input()
    return {
        "numbers": numbers_in,
        "stamps": stamps_in,
        "probe": numbers.probe(),
        "out": numbers.capture(),
    }


def _consolidated(changes):
    acc = {}
    for data, time, diff in changes:
        acc[(data, time)] = acc.get((data, time), 0) + diff
    return {k: v for k, v in acc.items() if v}


@pytest.mark.parametrize("workers", [1, 3])
def test_update_many_equals_one_update_per_record(workers):
    records = [(i % 7, f"v{i}") for i in range(500)]
    diffs = [1 + i % 3 for i in range(500)]
    with (
        tp.open_session(_flow, workers=workers) as bulk,
        tp.open_session(_flow, workers=workers) as single,
    ):
        bulk.update_many("numbers", records, diffs)
        bulk.update_many("numbers", records[:10], -1, times=3)
        for r, d in zip(records, diffs):
            single.update("numbers", r, d)
        for r in records[:10]:
            single.update("numbers", r, -1, 3)
        for s in (bulk, single):
            s.advance_to(4)
            s.wait("probe")
        got = _consolidated(bulk.changes("out"))  # changes() hands each change out once
        assert got == _consolidated(single.changes("out"))
        assert len(got) == 510 and got[((3, "v3"), 3)] == -1 and got[((3, "v3"), 0)] == 1


def test_update_many_refuses_the_whole_call_naming_the_bad_record():
    with tp.open_session(_flow, workers=2) as s:
        s.update("numbers", 0)
        with pytest.raises(SessionInputError, match=r"\[1\].*cannot be routed") as info:
            s.update_many("numbers", [1, 2, [1], 4])
        assert info.value.value == [1]
        with pytest.raises(SessionInputError, match="diff 1.5 of type float"):
            s.update_many("numbers", [1, 2], [1, 1.5])
        with pytest.raises(SessionInputError, match="3 diffs for 2 records"):
            s.update_many("numbers", [1, 2], [1, 1, 1])
        with pytest.raises(SessionInputError, match="time -1 is before the time 0"):
            s.update_many("numbers", [1, 2], times=[0, -1])
        with pytest.raises(SessionInputError, match="cannot retract record 5"):
            s.update_many("stamps", [4, 5], [1, -1])
        assert s.pending == 1  # only the single update: nothing of the refused calls
        s.advance_to(1)
        s.wait("probe")
        assert s.changes("out") == [(0, 0, 1)]
