"""Faults in long-lived driver sessions: bad input loses nothing, misuse does not poison the
session, strays cannot stop it starting, hung workers are found, and nothing outlives it."""

from __future__ import annotations

import logging
import os
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time
import warnings
from collections import Counter
from typing import Any, Dict, List

import cloudpickle
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import timelypy as tp
from timelypy.errors import (
    HandleKindError,
    InputClosedError,
    SessionInputError,
    TimelyError,
    UnknownHandleError,
    WaitTimeoutError,
    WorkerError,
    WorkerHungError,
)
from timelypy.workers.sessions import rendezvous

psutil = pytest.importorskip("psutil")

cloudpickle.register_pickle_by_value(sys.modules[__name__])

BACKENDS = [
    ("inline", 1),
    ("inline", 2),
    pytest.param("processes", 2, marks=pytest.mark.processes),
    pytest.param("ray", 2, marks=pytest.mark.ray),
]
REMOTE = [
    pytest.param("processes", marks=pytest.mark.processes),
    pytest.param("ray", marks=pytest.mark.ray),
]


def count_dataflow(scope):
    records_in, records = scope.new_collection()
    counts = records.count()
    numbers_in, numbers = scope.new_input()
    return {
        "records": records_in,
        "counts": counts.capture(),
        "probe": counts.probe(),
        "by_record": counts.arrange_by_key(),
        "numbers": numbers_in,
        "numbers_out": numbers.capture(),
    }


@pytest.fixture
def backend_ready(request, backend):
    """Ray sessions use the suite's shared local Ray (tests/conftest.py)."""
    if backend == "ray":
        request.getfixturevalue("ray_session")


def worker_descendants() -> List[int]:
    """Live worker processes started by this test process: children of its forkserver and its
    own spawn children (the forkserver and resource tracker themselves are not workers)."""
    found = []
    for child in psutil.Process().children():
        try:
            cmdline = " ".join(child.cmdline())
            if "multiprocessing.forkserver" in cmdline:
                found += [p.pid for p in child.children() if p.status() != psutil.STATUS_ZOMBIE]
            elif "multiprocessing.spawn" in cmdline and child.status() != psutil.STATUS_ZOMBIE:
                found.append(child.pid)
        except psutil.Error:
            continue
    return found


def assert_gone(pids: List[int], within: float = 5.0) -> None:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        alive = [
            p
            for p in pids
            if psutil.pid_exists(p) and psutil.Process(p).status() != psutil.STATUS_ZOMBIE
        ]
        if not alive and not worker_descendants():
            return
        time.sleep(0.05)
    raise AssertionError(f"processes left behind: {alive} {worker_descendants()}")


def totals(changes) -> Dict[Any, int]:
    acc: Counter = Counter()
    for data, _time, diff in changes:
        acc[data] += diff
    return {k: v for k, v in acc.items() if v}


class Locked(str):
    """A routable record (a str) that cannot be pickled: it holds a lock."""

    def __new__(cls, text: str) -> "Locked":
        self = super().__new__(cls, text)
        self.lock = threading.Lock()
        return self


def deeply_nested(depth: int) -> Any:
    value: Any = 0
    for _ in range(depth):
        value = (value,)
    return value


# ------------------------------------------------------------------------------------------
# 1, 12: bad records lose nothing and are named


@pytest.mark.timeout(120)
@pytest.mark.parametrize("backend,workers", BACKENDS)
def test_bad_updates_are_rejected_at_the_call_and_nothing_is_lost(backend, workers, backend_ready):
    started = time.monotonic()
    with tp.open_session(
        count_dataflow,
        workers=workers,
        backend=backend,
        timeout=60,
        **({} if backend == "inline" else {"heartbeat_timeout": 5}),
    ) as s:
        for k in range(100):
            s.insert("records", k % 10)
        bad = [
            ([1], "list"),
            ({"a": 1}, "dict"),
            (threading.Lock(), "lock"),
            (deeply_nested(5000), "tuple"),
        ]
        for record, type_name in bad:
            with pytest.raises(
                SessionInputError,
                match=rf"input 'records': record .* of type "
                rf"{type_name} cannot be routed",
            ) as info:
                s.insert("records", record)
            assert info.value.input == "records" and info.value.value is record
        for diff, type_name in [(1.5, "float"), (True, "bool"), ("2", "str"), (None, "NoneType")]:
            with pytest.raises(
                SessionInputError,
                match=rf"input 'records', worker \d+: diff "
                rf".* of type {type_name} .* is not an "
                rf"integer",
            ):
                s.update("records", 3, diff)
        with pytest.raises(SessionInputError, match="cannot retract"):
            s.remove("numbers", 1)  # a timely input takes positive counts only
        assert s.pending == 100
        s.advance_to(2)
        with pytest.raises(
            SessionInputError,
            match=r"time 1 is before the time 2 of input "
            r"'records'",
        ):
            s.update_at("records", 5, 1, 1)
        with pytest.raises(SessionInputError, match="of type str .* is not a time"):
            s.update_at("records", 5, "3", 1)
        s.update("records", 7, __import__("numpy").int64(2))  # numpy integers are integers
        s.advance_to(3)
        s.wait("probe")
        assert s.time == 3 and s.pending == 0
        assert totals(s.changes("counts")) == {(k, 10 + 2 * (k == 7)): 1 for k in range(10)}
    assert time.monotonic() - started < 60


@pytest.mark.timeout(120)
@pytest.mark.parametrize("backend", REMOTE)
def test_unsendable_records_are_rejected_at_flush_naming_input_worker_and_type(
    backend, backend_ready
):
    with tp.open_session(count_dataflow, workers=2, backend=backend, timeout=60) as s:
        for k in range(100):
            s.insert("records", k)
        s.insert("records", Locked("held"))  # routable, but cannot be pickled
        with pytest.raises(
            SessionInputError,
            match=r"input 'records', worker [01]: record "
            r"'held' of type Locked .* cannot be sent "
            r"to a worker",
        ) as info:
            s.advance_to(1)
        assert info.value.rejected == [("records", "held", 0, 1)]
        assert s.time == 0 and s.pending == 100  # the driver's time did not move
        s.advance_to(1)  # the rest goes now
        s.wait("probe")
        assert totals(s.changes("counts")) == {(k, 1): 1 for k in range(100)}
        with pytest.raises(SessionInputError, match="key .* of type lock cannot be routed"):
            s.lookup("by_record", threading.Lock())
        with pytest.raises(
            SessionInputError,
            match=r"lookup in 'by_record', worker [01]: key "
            r"'held' of type Locked cannot be used: it "
            r"cannot be sent to a worker",
        ):
            s.lookup("by_record", Locked("held"))
        assert s.lookup("by_record", 5) == {1: 1}


class AheadInput:
    """An input handle whose own time is ahead of the driver's: only the worker can tell."""

    def __init__(self) -> None:
        self.time = 5
        self.got: List[Any] = []

    @property
    def closed(self) -> bool:
        return False

    def send_updates(self, updates):
        self.got.extend(updates)

    def advance_to(self, time):
        self.time = max(self.time, time)

    def flush(self):
        pass


@pytest.mark.parametrize("workers", [1, 2])
def test_a_rejection_on_a_worker_rejects_the_batch_atomically(workers):
    ahead: List[AheadInput] = []

    def dataflow(scope):
        handles = count_dataflow(scope)
        handles["ahead"] = AheadInput()
        ahead.append(handles["ahead"])
        return handles

    with tp.open_session(dataflow, workers=workers, timeout=10) as s:
        for k in range(50):
            s.insert("records", k)
        s.insert("ahead", "early")  # time 0: the workers' input is at 5
        with pytest.raises(
            SessionInputError,
            match=r"input 'ahead', worker \d: record 'early' "
            r"of type str .* rejected: on worker \d: "
            r"time 0 is before the input's time 5",
        ):
            s.flush()
        assert all(h.got == [] for h in ahead)  # nothing of the batch was applied
        assert s.pending == 50
        s.advance_to(1)
        s.wait("probe")
        assert totals(s.changes("counts")) == {(k, 1): 1 for k in range(50)}


# ------------------------------------------------------------------------------------------
# 10: misuse does not poison the session


@pytest.mark.timeout(120)
@pytest.mark.parametrize("backend,workers", BACKENDS)
def test_misspelt_names_and_wrong_kinds_fail_in_the_driver(backend, workers, backend_ready):
    started = time.monotonic()
    s = tp.open_session(count_dataflow, workers=workers, backend=backend, timeout=60)
    try:
        s.insert("records", 1)
        for call in (
            lambda: s.insert("recrods", 1),
            lambda: s.wait("prbe"),
            lambda: s.changes("count"),
            lambda: s.lookup("by_recrod", 1),
            lambda: s.advance_to(1, input="nope"),
        ):
            with pytest.raises(
                UnknownHandleError,
                match=r"no handle named .*; the dataflow "
                r"returned \['by_record', 'counts', "
                r"'numbers'",
            ) as info:
                call()
            assert isinstance(info.value, KeyError)
        with pytest.raises(
            HandleKindError, match="handle 'probe' is a ProbeHandle, expected an input"
        ):
            s.insert("probe", 1)
        with pytest.raises(HandleKindError, match="expected a probe"):
            s.wait("by_record")
        s.insert("records", 1)
        s.advance_to(1)
        s.wait("probe")
        assert s.lookup("by_record", 1) == {2: 1}
        s.close(timeout=30)  # no error left over to re-raise
        with pytest.raises(InputClosedError):
            s.insert("records", 1)
    finally:
        s.abort()
    assert time.monotonic() - started < 60


def test_a_failed_worker_ends_the_session_and_close_does_not_raise_it_again():
    def failing(scope):
        records_in, records = scope.new_collection()
        probe = records.map(lambda r: 1 // (r - 7)).probe()
        return {"records": records_in, "probe": probe}

    s = tp.open_session(failing, workers=2, timeout=10)
    s.insert("records", 7)
    s.advance_to(1)
    with pytest.raises(WorkerError, match="ZeroDivisionError"):
        s.wait("probe")
    with pytest.raises(WorkerError, match="ZeroDivisionError"):
        s.insert("records", 1)
    s.close()


# ------------------------------------------------------------------------------------------
# 9: stray connections to the driver


def _stray_listener(strays: List[socket.socket]):
    class StrayListener(rendezvous.DriverListener):
        """Opens three stray connections to itself before any worker connects."""

        def __init__(self, *args, **kwargs):
            kwargs["handshake_timeout"] = 0.5
            super().__init__(*args, **kwargs)
            for payload in (None, b"GARBAGE" * 20, b"x"):
                sock = socket.create_connection(self.address)
                if payload is not None:
                    sock.sendall(payload)
                if payload == b"x":
                    sock.close()  # hang up mid-handshake
                else:
                    strays.append(sock)  # silent, or garbage and then silent

    return StrayListener


@pytest.mark.timeout(60)
@pytest.mark.parametrize("backend", REMOTE)
def test_stray_connections_to_the_driver_are_refused_and_logged(
    backend, backend_ready, monkeypatch, caplog
):
    strays: List[socket.socket] = []
    monkeypatch.setattr(rendezvous, "DriverListener", _stray_listener(strays))
    caplog.set_level(logging.WARNING, logger="timelypy")
    started = time.monotonic()
    try:
        with tp.open_session(count_dataflow, workers=2, backend=backend, timeout=30) as s:
            startup = time.monotonic() - started
            s.insert("records", 1)
            s.advance_to(1)
            s.wait("probe")
            assert s.lookup("by_record", 1) == {1: 1}
            deadline = time.monotonic() + 5
            while time.monotonic() < deadline and len(_refusals(caplog)) < 3:
                time.sleep(0.05)
    finally:
        for sock in strays:
            sock.close()
    refusals = _refusals(caplog)
    assert len(refusals) == 3, refusals
    assert any("failed authentication" in m for m in refusals)  # garbage
    assert any("no handshake within 0.5 s" in m for m in refusals)  # silence
    assert any("connection ended during the handshake" in m for m in refusals)
    assert startup < 25


def _refusals(caplog) -> List[str]:
    return [
        r.getMessage()
        for r in caplog.records
        if r.name.startswith("timelypy.") and "refused connection" in r.getMessage()
    ]


# ------------------------------------------------------------------------------------------
# 5: hung workers, close bounds, nothing left at exit


def _stop_worker(pid: int, stopped: List[int]) -> None:
    os.kill(pid, signal.SIGSTOP)
    stopped.append(pid)


def _kill_stopped(stopped: List[int]) -> None:
    for pid in stopped:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


@pytest.mark.timeout(90)
@pytest.mark.parametrize("backend", REMOTE)
def test_a_stopped_worker_is_found_within_the_heartbeat_bound(backend, backend_ready):
    stopped: List[int] = []
    s = tp.open_session(count_dataflow, workers=2, backend=backend, timeout=60, heartbeat_timeout=2)
    try:
        pids = s.worker_pids
        s.insert("records", 1)
        s.advance_to(1)
        s.wait("probe")
        _stop_worker(pids[1], stopped)
        s.insert("records", 2)
        started = time.monotonic()
        with pytest.raises(
            WorkerHungError,
            match=r"worker 1 .* is hung: no heartbeat for "
            r"[\d.]+ s \(heartbeat_timeout=2 s",
        ) as info:
            s.advance_to(2)
            s.wait("probe")  # no timeout given: the heartbeat finds it
        elapsed = time.monotonic() - started
        assert info.value.worker == 1
        assert elapsed < 8, elapsed
        with pytest.raises(WorkerHungError):  # the session is over
            s.lookup("by_record", 1)
        s.close(timeout=5)
    finally:
        _kill_stopped(stopped)
        s.abort()
    if backend == "processes":
        assert_gone(pids)


@pytest.mark.processes
@pytest.mark.timeout(60)
def test_close_honours_its_timeout_with_a_stopped_worker():
    stopped: List[int] = []
    s = tp.open_session(count_dataflow, workers=2, backend="processes", timeout=60)
    try:
        pids = s.worker_pids
        s.insert("records", 1)
        _stop_worker(pids[1], stopped)
        started = time.monotonic()
        with pytest.raises(WaitTimeoutError):
            s.close(timeout=5)
        elapsed = time.monotonic() - started
        assert elapsed < 7, elapsed
        assert_gone(pids)  # killed, even the stopped one
    finally:
        _kill_stopped(stopped)
        s.abort()


EXIT_SCRIPT = """
import logging, sys, threading, time
import timelypy as tp

logging.basicConfig()  # the library only logs (its logger has a NullHandler): show warnings


def dataflow(scope):
    records_in, records = scope.new_collection()
    return {"records": records_in, "probe": records.count().probe()}


def forever(worker):
    time.sleep(1000)


if __name__ == "__main__":
    if sys.argv[1] == "session":
        s = tp.open_session(dataflow, workers=2, backend="processes", timeout=30)
        s.insert("records", 1)
        s.advance_to(1)
        s.wait("probe")
        print(" ".join(map(str, s.worker_pids)), flush=True)
    else:
        threading.Thread(target=tp.execute, args=(forever,),
                         kwargs={"workers": 2, "backend": "processes"}, daemon=True).start()
        time.sleep(2)
        print("started", flush=True)
"""


@pytest.mark.processes
@pytest.mark.timeout(60)
@pytest.mark.parametrize("case", ["session", "job"])
def test_an_unclosed_session_or_job_does_not_keep_the_interpreter_alive(tmp_path, case):
    script = tmp_path / "unclosed.py"
    script.write_text(textwrap.dedent(EXIT_SCRIPT))
    started = time.monotonic()
    proc = subprocess.Popen(
        [sys.executable, str(script), case],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        out, err = proc.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        for child in psutil.Process(proc.pid).children(recursive=True):
            child.kill()
        proc.kill()
        raise AssertionError("the interpreter did not exit") from None
    assert proc.returncode == 0, err
    assert time.monotonic() - started < 20
    if case == "session":
        pids = [int(p) for p in out.split()]
        assert len(pids) == 2
        assert_gone(pids)
        assert "was not closed" in err


# ------------------------------------------------------------------------------------------
# the accepted operations give exactly the from-scratch answer


def test_worker_pids_and_handle_names():
    with tp.open_session(count_dataflow, workers=2, timeout=10) as s:
        assert s.worker_pids == [os.getpid()] * 2
        assert s.handle_names == [
            "by_record",
            "counts",
            "numbers",
            "numbers_out",
            "probe",
            "records",
        ]
        s.insert("records", 1)
        assert s.discard() == [("records", 1, 0, 1)] and s.pending == 0


def test_timely_inputs_and_errors_are_timely_errors():
    with tp.open_session(count_dataflow, timeout=10) as s:
        s.update("numbers", 4, 2)
        s.advance_to(1)
        s.wait("probe")
        assert sorted(s.changes("numbers_out")) == [(0, 4), (0, 4)]
        with pytest.raises(TimelyError):
            s.advance_to(0)


# ------------------------------------------------------------------------------------------
# property: valid and invalid operations at random; the accepted ones give the exact answer


GOOD_RECORDS = st.one_of(
    st.integers(-3, 3),
    st.sampled_from(["a", "b", ""]),
    st.tuples(st.integers(0, 2), st.sampled_from(["x", "y"])),
)
# Routable, so accepted at the call; cannot be pickled, so a remote flush rejects it.
LOCKED_RECORDS = st.builds(Locked, st.sampled_from(["a", "q"]))
BAD_RECORDS = st.sampled_from([[1], {"k": 1}, {2}, bytearray(b"z")])
GOOD_DIFFS = st.integers(-3, 3)
BAD_DIFFS = st.sampled_from([1.5, True, "1", None])
NAMES = st.sampled_from(["records", "records", "records", "recrods", "probe"])

OPERATIONS = st.one_of(
    st.tuples(st.just("insert"), NAMES, st.one_of(GOOD_RECORDS, BAD_RECORDS, LOCKED_RECORDS)),
    st.tuples(st.just("remove"), NAMES, st.one_of(GOOD_RECORDS, BAD_RECORDS)),
    st.tuples(
        st.just("update"),
        NAMES,
        st.one_of(GOOD_RECORDS, BAD_RECORDS),
        st.one_of(GOOD_DIFFS, BAD_DIFFS),
    ),
    st.tuples(st.just("update_at"), NAMES, GOOD_RECORDS, st.integers(-2, 3), GOOD_DIFFS),
    st.tuples(st.just("advance"), st.integers(-1, 2)),
    st.tuples(st.just("wait"), st.sampled_from(["probe", "prbe", "records"])),
)


def _apply(s, op, accepted: Counter) -> None:
    """Run ``op`` on session ``s``; record it in ``accepted`` if the session took it."""
    kind = op[0]
    try:
        if kind == "insert":
            s.insert(op[1], op[2])
            accepted[op[2]] += 1
        elif kind == "remove":
            s.remove(op[1], op[2])
            accepted[op[2]] -= 1
        elif kind == "update":
            s.update(op[1], op[2], op[3])
            accepted[op[2]] += op[3]
        elif kind == "update_at":
            s.update_at(op[1], op[2], s.time + op[3], op[4])
            accepted[op[2]] += op[4]
        elif kind == "advance":
            s.advance_to(s.time + op[1])
        else:
            with warnings.catch_warnings():  # a wait before advance_to is one of the moves
                warnings.simplefilter("ignore", tp.PendingTimeWarning)
                s.wait(op[1], timeout=30)
    except SessionInputError as exc:
        for _input, data, _time, diff in exc.rejected:  # rejected at a flush: taken back
            accepted[data] -= diff
    except (UnknownHandleError, HandleKindError):
        pass
    except TimelyError as exc:  # advancing backwards: the only other rejection
        assert kind == "advance" and op[1] < 0, exc


def _check_random_session(backend: str, workers: int, operations) -> None:
    accepted: Counter = Counter()
    with tp.open_session(count_dataflow, workers=workers, backend=backend, timeout=60) as s:
        for op in operations:
            _apply(s, op, accepted)
        for _ in range(2):  # a flush rejection drops the bad updates; the rest goes next time
            try:
                s.advance_to(s.time + 4)  # past every update_at
                break
            except SessionInputError as exc:
                for _input, data, _time, diff in exc.rejected:
                    accepted[data] -= diff
        s.wait("probe")
        expected = {(r, m): 1 for r, m in accepted.items() if m}
        assert totals(s.changes("counts")) == expected
        for record in [r for r in accepted if type(r) is not Locked][:3]:
            assert s.lookup("by_record", record) == (
                {accepted[record]: 1} if accepted[record] else {}
            )


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(workers=st.integers(1, 2), operations=st.lists(OPERATIONS, max_size=40))
def test_random_valid_and_invalid_operations_inline(workers, operations):
    _check_random_session("inline", workers, operations)


@pytest.mark.processes
@pytest.mark.timeout(120)
@settings(max_examples=5, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(operations=st.lists(OPERATIONS, min_size=10, max_size=40))
def test_random_valid_and_invalid_operations_processes(operations):
    _check_random_session("processes", 2, operations)


# ------------------------------------------------------------------------------------------
# execute: a worker that stops itself is found by the heartbeat, with no job timeout


def stop_myself(pid_dir: str):
    def build(worker):
        with open(os.path.join(pid_dir, f"{worker.index}.pid"), "w") as f:
            f.write(str(os.getpid()))
        if worker.index == 1:
            os.kill(os.getpid(), signal.SIGSTOP)
        return worker.index

    return build


@pytest.mark.timeout(90)
@pytest.mark.parametrize("backend", REMOTE)
def test_execute_finds_a_stopped_worker_without_a_timeout(backend, backend_ready, tmp_path):
    started = time.monotonic()
    try:
        with pytest.raises(WorkerHungError, match=r"worker 1 .* is hung") as info:
            tp.execute(stop_myself(str(tmp_path)), workers=2, backend=backend, heartbeat_timeout=2)
        assert info.value.worker == 1
        assert time.monotonic() - started < 15
    finally:
        pids = [int(p.read_text()) for p in tmp_path.glob("*.pid")]
        _kill_stopped(
            pids[1:]
            if backend == "processes"
            else [int((tmp_path / "1.pid").read_text())]
            if (tmp_path / "1.pid").exists()
            else []
        )
    if backend == "processes":
        assert_gone(pids)
