"""Operator statistics (timelypy.stats): known counts per operator, on inline workers and processes,
per worker and summed; from execute and from a session; arrangement sizes; plain-data transport."""

from __future__ import annotations

import json
import pickle
import sys
import types

import msgpack
import pytest

import timelypy as tp
from timelypy.instrument import Instruments
from timelypy.stats import COUNTERS, Statistics, StatsSink, export_ray_metrics

RECORDS = 100
PASSING = 37  # x + 1 for x in 0..99 with (x + 1) % 100 < 37: 1..36 and 100 -> 37 records
DISTINCT = 10


def _dataflow(scope):
    nums_in, nums = scope.new_collection()
    passed = nums.map(lambda x: x + 1).filter(lambda x: x % 100 < PASSING)
    arranged = nums.map(lambda x: x % DISTINCT).arrange_by_self()
    return {"nums": nums_in, "probe": passed.probe(), "arranged": arranged}


def _build(worker):
    handles = worker.dataflow(_dataflow)
    for x in range(worker.index, RECORDS, worker.peers):  # each worker feeds its share
        handles["nums"].insert(x)
    return worker.index


def _check_counts(stats: Statistics, workers: int) -> None:
    assert sorted(stats.workers) == list(range(workers))
    (inp,) = stats.find("Input")
    assert inp["records_out"] == RECORDS and inp["records_in"] == 0
    (probe,) = stats.find("Probe")
    assert probe["records_in"] == PASSING
    chain = stats.operator(probe["scope"], probe["operator"] - 1)  # map + filter, fused
    assert chain["name"].startswith("Linear")
    assert (chain["records_in"], chain["records_out"]) == (RECORDS, PASSING)
    (arrange,) = stats.find("Arrange")
    assert arrange["records_in"] == RECORDS
    # the arrangement holds one consolidated update per distinct record
    assert arrange["arrangement"]["updates"] == DISTINCT
    assert arrange["arrangement"]["keys"] == DISTINCT
    for op in stats.operators():
        assert op["workers"] == workers
        assert op["scheduled"] >= workers and op["elapsed"] > 0
        assert op["batches_in"] >= (1 if op["records_in"] else 0)
        assert op["batches_out"] >= (1 if op["records_out"] else 0)
        for c in COUNTERS:  # summed equals the sum of the workers
            per = sum(stats.per_worker(w)[(op["scope"], op["operator"])][c] for w in range(workers))
            assert op[c] == pytest.approx(per), (op, c)


@pytest.mark.parametrize("workers", [1, 2])
def test_execute_inline_counts(workers):
    stats = Statistics()
    results = tp.execute(_build, workers=workers, statistics=stats)
    assert results == list(range(workers))  # the return value is unchanged
    _check_counts(stats, workers)
    if workers == 2:  # each worker fed its half
        for w in range(2):
            assert stats.per_worker(w)[("dataflow1", 1)]["records_out"] == RECORDS // 2


def test_execute_processes_counts():
    stats = Statistics()
    assert tp.execute(_build, workers=2, backend="processes", statistics=stats, timeout=120) == [
        0,
        1,
    ]
    _check_counts(stats, 2)


def test_execute_without_statistics_leaves_no_sink():
    def build(worker):
        worker.dataflow(_dataflow)
        return worker.instruments.enabled

    assert tp.execute(build) == [False]


def test_session_stats_inline():
    with tp.open_session(_dataflow, workers=2, statistics=True) as s:
        for x in range(RECORDS):
            s.insert("nums", x)
        s.advance_to(1)
        s.wait("probe")
        stats = s.stats()
        (probe,) = stats.find("Probe")
        chain = stats.operator(probe["scope"], probe["operator"] - 1)
        assert (chain["records_in"], chain["records_out"]) == (RECORDS, PASSING)
        (arrange,) = stats.find("Arrange")
        assert arrange["arrangement"]["updates"] == DISTINCT
        assert arrange["arrangement"]["since"]  # the workers' compaction frontiers
        s.insert("nums", 1000)
        s.advance_to(2)
        s.wait("probe")
        assert s.stats().find("Input")[0]["records_out"] == RECORDS + 1


def test_session_stats_processes():
    with tp.open_session(
        _dataflow, workers=2, backend="processes", statistics=True, timeout=120
    ) as s:
        for x in range(RECORDS):
            s.insert("nums", x)
        s.advance_to(1)
        s.wait("probe")
        stats = s.stats()
        assert sorted(stats.workers) == [0, 1]
        (probe,) = stats.find("Probe")
        chain = stats.operator(probe["scope"], probe["operator"] - 1)
        assert (chain["records_in"], chain["records_out"]) == (RECORDS, PASSING)


def test_session_without_statistics_says_how_to_turn_them_on():
    with tp.open_session(_dataflow) as s:
        with pytest.raises(tp.errors.SessionCommandError, match="statistics=True"):
            s.stats()


def test_statistics_are_plain_data():
    stats = Statistics()
    tp.execute(_build, workers=2, statistics=stats)
    data = stats.to_dict()
    assert Statistics.from_dict(json.loads(stats.to_json())).operators() == stats.operators()
    assert Statistics.from_dict(msgpack.unpackb(msgpack.packb(data))).to_dict() == data
    assert pickle.loads(pickle.dumps(stats)).to_dict() == data


def test_table_and_annotations():
    stats = Statistics()
    tp.execute(_build, statistics=stats)
    text = stats.render()
    assert "ArrangeBySelf" in text and "records in" in text
    assert "worker 0" in stats.render(worker=0)
    notes = stats.annotations()
    (probe,) = stats.find("Probe")
    key = (probe["scope"], probe["operator"] - 1)
    assert notes[key].startswith(f"in {RECORDS} / out {PASSING}")
    assert all(
        isinstance(k, tuple)
        and isinstance(k[0], str)
        and isinstance(k[1], int)
        and isinstance(v, str)
        for k, v in notes.items()
    )
    assert (
        "trace 10 updates"
        in notes[next((o["scope"], o["operator"]) for o in stats.find("Arrange"))]
    )


def _counting_to(limit):
    """The numbers from what was inserted up to ``limit``, by a loop: ``x -> min(x + 1, limit)``."""
    return lambda nums: nums.iterate(
        lambda inner: inner.map(lambda x: min(x + 1, limit)).concat(inner).distinct()
    )


def _sink_snapshot(drive) -> dict:
    """Run ``drive(worker)`` on one inline worker with a statistics sink; its snapshot."""

    def build(worker):
        sink = worker.instruments.add(StatsSink(worker.index))
        drive(worker)
        return sink.snapshot()

    (snapshot,) = tp.execute(build)
    return snapshot


def test_sink_attributes_batches_and_nested_scopes():
    def dataflow(scope):
        nums_in, nums = scope.new_collection()
        return nums_in, _counting_to(5)(nums).probe()

    def drive(worker):
        nums_in, probe = worker.dataflow(dataflow)
        nums_in.insert(0)
        nums_in.advance_to(1)
        nums_in.flush()
        worker.step_until(probe, 1)

    snapshot = _sink_snapshot(drive)
    scopes = {op["scope"] for op in snapshot["operators"]}
    assert len(scopes) >= 2  # the root scope and the loop's scope
    inp = next(op for op in snapshot["operators"] if op["name"] == "Input")
    assert inp["batches_out"] >= 1 and inp["records_out"] == 1


def test_two_loops_alike_are_two_scopes_in_the_statistics():
    """Statistics key operators by (scope name, index): two loops both named ``Iterate`` (and
    two dataflows given one name) get unique names, so their counts do not add up as one."""

    def dataflow(scope):
        nums_in, nums = scope.new_collection()
        return nums_in, _counting_to(3)(nums).concat(_counting_to(9)(nums)).probe()

    def drive(worker):
        for _ in range(2):
            nums_in, _ = worker.dataflow(dataflow, name="loops")
            nums_in.insert(0)
            nums_in.close()
        worker.step_until_done(timeout=30)

    snapshot = _sink_snapshot(drive)
    distinct_in = {
        op["scope"]: op["records_in"]
        for op in snapshot["operators"]
        if op["name"].startswith("Distinct")
    }
    assert sorted(distinct_in) == ["Iterate", "Iterate#2", "Iterate#3", "Iterate#4"]
    # each dataflow's two loops count to 3 and to 9: the same pair of counts twice
    assert sorted(distinct_in.values()) == sorted(
        [distinct_in["Iterate"]] * 2 + [distinct_in["Iterate#2"]] * 2
    )
    assert distinct_in["Iterate"] < distinct_in["Iterate#2"]
    assert {op["scope"] for op in snapshot["operators"]} >= {"loops", "loops#2"}


def test_export_ray_metrics_with_a_stand_in_for_ray(monkeypatch):
    calls = []

    class Metric:
        def __init__(self, name, description="", tag_keys=()):
            self.name = name
            assert tag_keys == ("worker", "operator")

        def inc(self, value, tags=None):
            calls.append(("inc", self.name, value, tags))

        def set(self, value, tags=None):
            calls.append(("set", self.name, value, tags))

    metrics = types.SimpleNamespace(Counter=Metric, Gauge=Metric)
    util = types.ModuleType("ray.util")
    util.metrics = metrics
    monkeypatch.setitem(sys.modules, "ray.util", util)
    monkeypatch.setitem(sys.modules, "ray.util.metrics", metrics)
    stats = Statistics()
    tp.execute(_build, statistics=stats)
    snapshot = {"worker": 7, "operators": stats.workers[0]}
    assert export_ray_metrics(snapshot) > 0
    names = {c[1] for c in calls}
    assert "timelypy_operator_records_out" in names and "timelypy_arrangement_updates" in names
    assert all(c[3]["worker"] == "7" for c in calls)
    calls.clear()
    export_ray_metrics(snapshot)  # nothing new: counters are not increased again
    assert not [c for c in calls if c[0] == "inc"]


def test_instrument_hub_without_sinks_stays_disabled():
    hub = Instruments(0)
    sink = hub.add(StatsSink(0))
    hub.remove(sink)
    assert not hub.enabled


def _build_in_ray(worker):
    from timelypy.stats import in_ray_actor

    _build(worker)
    return in_ray_actor()


@pytest.mark.ray
@pytest.mark.timeout(180)
def test_execute_ray_counts_and_metrics(ray_session):
    stats = Statistics()
    assert tp.execute(_build_in_ray, workers=2, backend="ray", statistics=stats, timeout=120) == [
        True,
        True,
    ]  # so the workers exported Ray metrics too
    _check_counts(stats, 2)
