"""The instrument seam: typed events from the hot paths reach registered sinks, on every backend."""

from __future__ import annotations

import collections

import pytest

import timelypy as tp
from timelypy.dataflow import Exchange
from timelypy.instrument import (
    EVENT_TYPES,
    BatchProduced,
    ChannelReceived,
    ChannelSent,
    EventLog,
    FrontierChanged,
    Instruments,
    LinkBytes,
    LoggingSink,
    OperatorFinished,
    OperatorScheduled,
)


def _exchange_program(worker, log=None):
    """Each worker sends 0..99 (its share) through an exchange; returns what the log saw."""
    if log is not None:
        worker.instruments.add(log)

    def dataflow(scope):
        inp, stream = scope.new_input()
        out = stream.exchange(lambda x: (x, "k")).map(lambda x: x + 1, name="PlusOne").capture()
        return inp, out, stream.probe()

    inp, out, probe = worker.dataflow(dataflow)
    for epoch in range(3):
        inp.send_batch([x for x in range(100) if x % worker.peers == worker.index])
        inp.advance_to(epoch + 1)
        worker.step_until(probe, inp.time)
    return out


def _summary(log: EventLog, worker_index: int) -> dict:
    finished = log.of(OperatorFinished)
    return {
        "worker": worker_index,
        "scheduled": collections.Counter(e.name for e in log.of(OperatorScheduled)),
        "finished": collections.Counter(e.name for e in finished),
        "elapsed_ok": all(e.elapsed >= 0 for e in finished),
        "produced": sum(e.records for e in log.of(BatchProduced)),
        "sent": sum(e.records for e in log.of(ChannelSent)),
        "sent_remote": sum(e.records for e in log.of(ChannelSent) if e.target != e.worker),
        "received": sum(e.records for e in log.of(ChannelReceived)),
        "frontier_times": sorted(
            {t for e in log.of(FrontierChanged) for t, d in e.changes if d > 0}
        ),
        "link_bytes": sum(e.bytes_sent for e in log.of(LinkBytes)),
        "link_frames_received": sum(e.frames_received for e in log.of(LinkBytes)),
        "workers_named": {e.worker for e in log.events},
    }


def test_one_worker_events():
    log = EventLog()

    def build(worker):
        _exchange_program(worker, log)
        return _summary(log, worker.index)

    s = tp.execute(build)[0]
    assert s["scheduled"]["PlusOne"] >= 3 and s["scheduled"] == s["finished"]
    assert s["elapsed_ok"]
    # input 300 records, exchange passes 300 on (pipeline on one worker: no channel events)
    assert s["produced"] >= 600
    assert s["sent"] == 0 and s["received"] == 0 and s["link_bytes"] == 0
    assert {1, 2, 3} <= set(s["frontier_times"])
    assert s["workers_named"] == {0}


def test_inline_two_workers_channel_totals_match():
    logs = [EventLog(), EventLog()]

    def build(worker):
        _exchange_program(worker, logs[worker.index])
        return _summary(logs[worker.index], worker.index)

    a, b = tp.execute(build, workers=2)
    # every record crosses the exchange exactly once; what one worker sends away the other gets
    assert a["sent"] + b["sent"] == 300
    assert a["sent_remote"] + b["sent_remote"] == a["received"] + b["received"] > 0
    assert a["workers_named"] == {0} and b["workers_named"] == {1}


@pytest.mark.processes
def test_processes_report_link_bytes():
    def build(worker):
        log = EventLog(kinds=(LinkBytes, ChannelSent, ChannelReceived))
        _exchange_program(worker, log)
        return _summary(log, worker.index)

    a, b = tp.execute(build, workers=2, backend="processes", timeout=60)
    assert a["link_bytes"] > 0 and b["link_bytes"] > 0
    assert a["link_frames_received"] > 0 and b["link_frames_received"] > 0
    assert a["sent_remote"] + b["sent_remote"] == a["received"] + b["received"] > 0


def test_hub_is_disabled_without_sinks_and_removal_disables():
    hub = Instruments(3)
    assert hub.enabled is False
    seen = []
    hub.add(seen.append)
    assert hub.enabled
    hub.emit("x")
    hub.remove(seen.append)
    assert hub.enabled is False and seen == ["x"]
    with pytest.raises(TypeError, match="worker 3"):
        hub.add("not callable")


def test_a_worker_without_sinks_emits_nothing_and_output_is_unchanged():
    def build(worker, listen):
        log = EventLog()
        if listen:
            worker.instruments.add(log)
        out = _exchange_program(worker)
        return sorted(out.records()), len(log.events)

    quiet, listened = (
        tp.execute(lambda w: build(w, False))[0],
        tp.execute(lambda w: build(w, True))[0],
    )
    assert quiet[1] == 0 and listened[1] > 0
    assert quiet[0] == listened[0]


def test_event_log_is_bounded_and_filters():
    log = EventLog(kinds=(OperatorFinished,), limit=2)
    for i in range(5):
        log(OperatorFinished(0, "s", i, "op", 0.0))
        log(OperatorScheduled(0, "s", i, "op"))
    assert [e.operator for e in log.events] == [3, 4]
    assert log.dropped == 3
    with pytest.raises(ValueError):
        EventLog(limit=0)


def test_logging_sink_writes_events(caplog):
    sink = LoggingSink()
    with caplog.at_level("DEBUG", logger="timelypy.events"):
        sink(OperatorScheduled(0, "df", 1, "Map"))
    assert "OperatorScheduled" in caplog.text


def test_every_event_type_is_a_named_tuple_with_a_worker_field():
    for kind in EVENT_TYPES:
        assert kind._fields[0] == "worker", kind


def test_exchange_pact_events_name_the_channel():
    log = EventLog(kinds=(ChannelSent,))

    def build(worker):
        if worker.index == 0:
            worker.instruments.add(log)

        def dataflow(scope):
            inp, stream = scope.new_input()

            def factory(capability, info):
                capability.drop()
                return lambda input, output: [None for _ in input]

            stream.unary(factory, pact=Exchange(lambda x: (x, "k")), name="Drain")
            return inp

        inp = worker.dataflow(dataflow)
        if worker.index == 0:
            inp.send_batch(list(range(10)))
        return None

    tp.execute(build, workers=2)
    channels = {e.channel for e in log.events}
    assert len(channels) == 1 and sum(e.records for e in log.events) == 10
