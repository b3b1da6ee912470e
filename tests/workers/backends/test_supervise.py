"""The supervisor shared by the processes and ray backends: which failure it raises, and when."""

from __future__ import annotations

import time

import cloudpickle
import pytest

from timelypy.errors import WaitTimeoutError, WorkerDiedError, WorkerError
from timelypy.workers.launch import supervise
from timelypy.workers.launch.supervise import ERROR, OK, ErrorReport, Supervisor


def report_of(index: int, exc: BaseException) -> ErrorReport:
    try:
        raise exc
    except BaseException as raised:  # noqa: BLE001 - to get a traceback
        return ErrorReport.of(index, raised)


def test_a_root_cause_wins_over_a_peers_report():
    s = Supervisor(3)
    s.take(0, (ERROR, report_of(0, WorkerDiedError("worker 2 died", worker=2))))
    s.check_failures()  # a secondary report waits for the root cause
    s.take(2, (ERROR, report_of(2, ValueError("the real problem"))))
    with pytest.raises(WorkerError) as info:
        s.check_failures()
    assert not isinstance(info.value, WorkerDiedError)
    assert info.value.worker == 2 and "the real problem" in str(info.value)
    assert "ValueError" in info.value.traceback_text


def test_a_death_the_backend_saw_wins_over_a_peers_report():
    s = Supervisor(2, describe=lambda i: f"worker {i} (pid 42)")
    s.take(0, (ERROR, report_of(0, WorkerDiedError("worker 1 died", worker=1))))
    s.died(1, "worker 1 (pid 42) was killed by SIGKILL before returning a result")
    assert s.all_answered()
    with pytest.raises(WorkerDiedError, match="SIGKILL") as info:
        s.check_failures()
    assert info.value.worker == 1


def test_a_peers_report_is_raised_after_the_grace_period_or_when_final(monkeypatch):
    s = Supervisor(2, describe=lambda i: f"worker {i} (Ray actor)")
    s.take(0, (ERROR, report_of(0, WorkerDiedError("worker 1 died", worker=1))))
    with pytest.raises(
        WorkerDiedError,
        match=r"worker 1 \(Ray actor\) died \(reported by "
        r"worker 0",
    ) as info:
        s.check_failures(final=True)
    assert info.value.worker == 1
    monkeypatch.setattr(supervise, "SECONDARY_GRACE", 0.2)
    s = Supervisor(2)
    s.take(0, (ERROR, report_of(0, WorkerDiedError("worker 1 died", worker=1))))
    s.check_failures()  # within the grace period: wait for the root cause
    time.sleep(0.25)
    with pytest.raises(WorkerDiedError):
        s.check_failures()


def test_wait_times_out_with_the_message_and_returns_results_in_order():
    s = Supervisor(2)
    with pytest.raises(WaitTimeoutError, match=r"workers \[0, 1\] did not finish"):
        s.wait(
            lambda seconds: time.sleep(seconds),
            s.all_answered,
            time.monotonic() + 0.05,
            lambda: f"workers {s.unanswered()} did not finish",
        )
    outcomes = iter([(1, (OK, cloudpickle.dumps("one"))), (0, (OK, cloudpickle.dumps("zero")))])

    def pump(seconds: float) -> None:
        s.take(*next(outcomes))

    s.wait(pump, s.all_answered, None, lambda: "unreachable")
    assert s.results_in_order("test") == ["zero", "one"]


def test_a_result_that_cannot_be_unpickled_names_the_worker():
    s = Supervisor(1)
    s.take(0, (OK, b"not a pickle"))
    with pytest.raises(
        WorkerError, match="result of worker 0 could not be unpickled in the launcher"
    ) as info:
        s.results_in_order("launcher")
    assert info.value.worker == 0


def test_a_silent_worker_is_reported_hung_once_heard_from(monkeypatch):
    from timelypy.errors import WorkerHungError

    s = Supervisor(2, describe=lambda i: f"worker {i} (pid 7)", heartbeat_timeout=0.1)
    assert s.silent() == []  # never heard from: start-up is not counted
    s.heard(0)
    s.heard(1)
    time.sleep(0.15)
    s.heard(0)
    assert [i for i, _ in s.silent()] == [1]
    i, silence = s.silent()[0]
    s.died(i, s.hung_message(i, silence), hung=True)
    assert s.silent() == []  # answered now
    with pytest.raises(
        WorkerHungError,
        match=r"worker 1 \(pid 7\) is hung: no heartbeat for "
        r"0\.\d s \(heartbeat_timeout=0.1 s",
    ) as info:
        s.check_failures()
    assert info.value.worker == 1 and isinstance(info.value, WorkerDiedError)
    assert Supervisor(1).silent() == []  # no heartbeat_timeout: no check


def test_wait_stops_once_cancelled():
    import threading

    cancel = threading.Event()
    s = Supervisor(2, cancel=cancel)
    started = time.monotonic()
    threading.Timer(0.2, cancel.set).start()
    with pytest.raises(WaitTimeoutError, match=r"cancelled by its driver; workers \[0, 1\]"):
        s.wait(lambda seconds: time.sleep(seconds), s.all_answered, None, lambda: "never")
    assert time.monotonic() - started < 1.0


def test_heartbeat_interval_is_bounded():
    assert supervise.heartbeat_interval(None) is None
    assert supervise.heartbeat_interval(30) == 1.0
    assert supervise.heartbeat_interval(2) == 0.4
    with pytest.raises(ValueError, match="heartbeat_timeout must be positive"):
        supervise.heartbeat_interval(0)
