"""The statistics name the path (columns / objects / mixed) per arrangement and per join."""

from __future__ import annotations

import pytest

import timelypy as tp


def _paths(records, workers=1):
    stats = tp.Statistics()

    def build(worker):
        def dataflow(scope):
            session, c = scope.new_collection()
            keyed = c.map(lambda x: (x[0] % 50, x))
            return session, keyed.join(keyed).probe()

        session, probe = worker.dataflow(dataflow)
        for i in range(worker.index, len(records), worker.peers):
            session.insert(records[i])
        session.advance_to(1)
        session.flush()
        worker.step_until(probe, 1, timeout=60)

    tp.execute(build, statistics=stats, workers=workers)
    ops = stats.operators()
    arranged = {op["arrangement"]["path"] for op in ops if op["arrangement"]}
    joins = {op["path"] for op in ops if op["name"].startswith("Join")}
    return arranged, joins


@pytest.mark.parametrize("workers", [1, 2])
def test_fixed_width_records_are_named_columns(workers):
    assert _paths([(i, i * 2) for i in range(4000)], workers) == ({"columns"}, {"columns"})


def test_records_that_do_not_fit_are_named_objects():
    assert _paths([(i, str(i)) for i in range(4000)]) == ({"objects"}, {"objects"})


def test_the_object_path_when_columns_are_off(monkeypatch):
    monkeypatch.setenv("TIMELYPY_COLUMNS", "off")
    assert _paths([(i, i * 2) for i in range(4000)]) == ({"objects"}, {"objects"})
