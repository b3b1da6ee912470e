"""The backend registry and the session's handle protocols: a registered backend works for
``execute`` and ``open_session`` alike; unknown names and handles of the wrong kind fail clearly."""

from __future__ import annotations

import subprocess
import sys
from typing import Any, List, Optional

import pytest

import timelypy as tp
from timelypy.errors import HandleKindError, SessionCommandError, TimelyError, UnknownHandleError
from timelypy.workers.launch.backends import (
    Backend,
    backend_names,
    get_backend,
    register_backend,
    unregister_backend,
)
from timelypy.workers.launch.inline import local_workers, run_inline, run_inline_backend
from timelypy.workers.sessions.handles import Changes, Input, Lookup, Probe


def degree_dataflow(scope):
    edges_in, edges = scope.new_collection()
    degrees = edges.map(lambda e: e[0]).count()
    return {
        "edges": edges_in,
        "degrees": degrees.capture(),
        "probe": degrees.probe(),
        "by_node": degrees.arrange_by_key(),
    }


def drive_degrees(session) -> None:
    session.insert("edges", (1, 2))
    session.insert("edges", (1, 3))
    session.advance_to(1)
    session.wait("probe")
    assert session.lookup("by_node", 1) == {2: 1}
    assert sorted(session.changes("degrees")) == [((1, 2), 0, 1)]


@pytest.fixture
def toy_backends():
    """Two toy backends wrapping inline: stepped by the driver, and run in threads that
    connect back to the driver like remote workers. Unregistered afterwards."""
    calls: List[int] = []

    def run_toy(build, workers: int, timeout: Optional[float] = None, **options: Any):
        calls.append(workers)
        return run_inline_backend(build, workers, timeout=timeout, **options)

    def run_threads(build, workers: int, timeout: Optional[float] = None, **options: Any):
        calls.append(workers)
        return run_inline(build, workers, timeout=timeout)

    register_backend(Backend("toy", run_toy, local_workers=local_workers))
    register_backend(Backend("toy-remote", run_threads))
    try:
        yield calls
    finally:
        unregister_backend("toy")
        unregister_backend("toy-remote")


def test_registered_backend_runs_execute(toy_backends):
    assert "toy" in backend_names()
    assert tp.execute(lambda w: (w.index, w.peers), workers=2, backend="toy") == [(0, 2), (1, 2)]
    assert toy_backends == [2]


@pytest.mark.timeout(60)
@pytest.mark.parametrize("backend, workers", [("toy", 1), ("toy", 2), ("toy-remote", 2)])
def test_registered_backend_runs_sessions(toy_backends, backend, workers):
    with tp.open_session(degree_dataflow, workers=workers, backend=backend, timeout=30) as s:
        drive_degrees(s)
    assert toy_backends == ([] if backend == "toy" else [workers])


def test_unknown_backend_names_the_registered_ones():
    for call in (
        lambda: tp.execute(lambda w: None, backend="nope"),
        lambda: tp.open_session(degree_dataflow, backend="nope"),
    ):
        with pytest.raises(ValueError) as info:
            call()
        message = str(info.value)
        assert "unknown backend 'nope'" in message
        assert all(name in message for name in ("inline", "processes", "ray"))


def test_registration_is_checked():
    with pytest.raises(ValueError, match="already registered"):
        register_backend(Backend("inline", run_inline_backend))
    with pytest.raises(TypeError, match="expects a Backend"):
        register_backend("inline")  # type: ignore[arg-type]
    assert get_backend("inline").in_process and not get_backend("processes").in_process


def test_inline_backend_rejects_options():
    with pytest.raises(TypeError, match="no options"):
        tp.execute(lambda w: None, backend="inline", start_method="spawn")


def test_importing_timelypy_does_not_import_ray():
    code = (
        "import sys, timelypy as tp; tp.execute(lambda w: None); "
        "assert 'ray' not in sys.modules, 'ray imported'; "
        "assert 'timelypy.workers.launch.ray_actors' not in sys.modules"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


# ------------------------------------------------------------------------------------------
# handle protocols


def test_builtin_handles_implement_the_protocols():
    def dataflow(scope):
        handle, stream = scope.new_input()
        session, collection = scope.new_collection()
        return {
            "handle": handle,
            "session": session,
            "probe": collection.probe(),
            "captured": stream.capture(),
            "capture": collection.capture(),
            "arranged": collection.arrange_by_key(),
        }

    handles = tp.Worker().dataflow(dataflow)
    assert isinstance(handles["handle"], Input) and isinstance(handles["session"], Input)
    assert isinstance(handles["probe"], Probe) and not isinstance(handles["probe"], Input)
    assert isinstance(handles["captured"], Changes) and isinstance(handles["capture"], Changes)
    assert isinstance(handles["arranged"], Lookup) and not isinstance(handles["arranged"], Probe)


def test_handles_of_the_wrong_kind_are_named():
    with tp.open_session(degree_dataflow, timeout=10) as s:
        with pytest.raises(
            TimelyError,
            match=r"handle 'probe' is a ProbeHandle, expected an "
            r"arrangement \(lookup\)",
        ):
            s.lookup("probe", 1)
        with pytest.raises(
            TimelyError,
            match=r"handle 'by_node' is a Arranged, expected a "
            r"capture \(changes_from\)",
        ):
            s.changes("by_node")
        with pytest.raises(
            TimelyError,
            match=r"handle 'degrees' is a CapturedCollection, "
            r"expected an input",
        ):
            s.insert("degrees", 1)
            s.flush()
        with pytest.raises(TimelyError, match=r"expected a probe"):
            s.wait("by_node")


@pytest.mark.timeout(60)
def test_remote_sessions_check_handle_kinds_in_the_driver(toy_backends):
    with tp.open_session(degree_dataflow, workers=2, backend="toy-remote", timeout=30) as s:
        with pytest.raises(
            HandleKindError,
            match=r"handle 'probe' is a ProbeHandle, expected "
            r"an arrangement",
        ):
            s.lookup("probe", 1)
        with pytest.raises(
            UnknownHandleError,
            match=r"no handle named 'edgez'; the dataflow "
            r"returned \['by_node', 'degrees', 'edges'",
        ):
            s.insert("edgez", (1, 2))
        assert s.pending == 0
        drive_degrees(s)  # the session goes on


class FlakyLog:
    """A capture whose ``changes_from`` fails on worker 1 once: a command error."""

    def __init__(self, index: int) -> None:
        self.index = index
        self.calls = 0

    def changes_from(self, start: int):
        self.calls += 1
        if self.index == 1 and self.calls == 1:
            raise RuntimeError("flaky read")
        return [self.index], start + 1


@pytest.mark.timeout(60)
@pytest.mark.parametrize("backend", ["toy", "toy-remote"])
def test_a_failed_command_does_not_poison_the_session(toy_backends, backend):
    def dataflow(scope):
        handles = degree_dataflow(scope)
        handles["flaky"] = FlakyLog(scope.worker.index)
        return handles

    with tp.open_session(dataflow, workers=2, backend=backend, timeout=30) as s:
        with pytest.raises(
            SessionCommandError,
            match=r"'changes' failed on worker 1: "
            r"RuntimeError: flaky read",
        ) as info:
            s.changes("flaky")
        assert info.value.worker == 1
        assert sorted(s.changes("flaky")) == [0, 1]
        drive_degrees(s)


def test_timely_input_and_capture_through_a_session():
    def dataflow(scope):
        handle, stream = scope.new_input()
        doubled = stream.map(lambda x: 2 * x)
        return {"numbers": handle, "doubled": doubled.capture(), "probe": doubled.probe()}

    with tp.open_session(dataflow, workers=2, timeout=10) as s:
        for x in range(4):
            s.insert("numbers", x)
        s.advance_to(1)
        s.wait("probe")
        assert sorted(s.changes("doubled")) == [(0, 0), (0, 2), (0, 4), (0, 6)]
        assert s.frontier("probe") == [1]


def test_session_times_use_the_partial_order():
    def dataflow(scope):
        session, collection = scope.new_collection()
        return {"in": session, "probe": collection.probe()}

    with tp.open_session(dataflow, timeout=10) as s:
        s.advance_to(2)
        with pytest.raises(TimelyError, match="before"):
            s.advance_to(1)
        with pytest.raises(TimelyError, match="not at or after"):
            s.update_at("in", "x", 1, 1)
        s.update_at("in", "x", 3, 1)
