"""The progress display: off when stderr is not a terminal, on when forced (flag or
TIMELYPY_PROGRESS), shown only after a wait lasted a while, never from the waiting loop."""

from __future__ import annotations

import io
import time

import pytest

import timelypy as tp
from timelypy.workers import display as display_module
from timelypy.workers.display import ENV, ProgressDisplay, progress_enabled


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.fixture
def no_env(monkeypatch):
    monkeypatch.delenv(ENV, raising=False)
    display_module._LAST_DECISION.clear()
    yield
    display_module._LAST_DECISION.clear()


def test_enabled_rules(no_env, monkeypatch):
    assert progress_enabled(stream=io.StringIO()) is False  # not a terminal
    assert progress_enabled(stream=_Terminal()) is True  # a terminal
    assert progress_enabled(True, stream=io.StringIO()) is True  # forced by the flag
    assert progress_enabled(False, stream=_Terminal()) is False
    monkeypatch.setenv(ENV, "1")
    assert progress_enabled(stream=io.StringIO()) is True  # forced by the environment
    monkeypatch.setenv(ENV, "0")
    assert progress_enabled(stream=_Terminal()) is False
    assert progress_enabled(True, stream=_Terminal()) is True  # the flag wins


def test_off_in_ray_jobs(no_env, monkeypatch):
    monkeypatch.setenv("RAY_JOB_SUBMISSION_ID", "raysubmit_1")
    assert progress_enabled(stream=_Terminal()) is False


def test_a_display_shows_a_wait_after_its_delay():
    out = io.StringIO()
    shown = ProgressDisplay(stream=out, delay=0.05, interval=0.01)
    watch = shown.begin("loading", lambda: {"input": "5", "output": "[3]", "records": 1000})
    time.sleep(0.3)
    shown.end(watch)
    text = out.getvalue()
    assert "loading | input 5 | output [3] | 1,000 records" in text and "rec/s" in text
    quick = shown.begin("quick", lambda: {})
    shown.end(quick)
    time.sleep(0.05)
    assert "quick" not in out.getvalue()  # a short wait shows nothing


def test_a_terminal_gets_a_transient_live_line():
    out = _Terminal()
    shown = ProgressDisplay(stream=out, delay=0.0, interval=0.01)
    watch = shown.begin("waiting", lambda: {"output": "[7]"})
    time.sleep(0.2)
    shown.end(watch)
    assert "waiting" in out.getvalue()


def _slow_dataflow(scope):
    nums_in, nums = scope.new_collection()
    slow = nums.map(lambda x: time.sleep(0.8) or x)
    return {"nums": nums_in, "probe": slow.probe()}


def _slow_session_wait(progress=None):
    with tp.open_session(_slow_dataflow, progress=progress) as s:
        s.insert("nums", 1)
        s.advance_to(1)
        s.wait("probe")


def test_session_wait_shows_nothing_when_not_a_terminal(no_env, capfd):
    _slow_session_wait()
    assert "waiting" not in capfd.readouterr().err


def test_session_wait_shows_the_display_when_forced(no_env, capfd):
    _slow_session_wait(progress=True)
    err = capfd.readouterr().err
    assert "session: waiting for 'probe' to pass 1" in err and "input 1" in err


def test_step_until_shows_the_display_when_forced_by_the_environment(no_env, monkeypatch, capfd):
    monkeypatch.setenv(ENV, "1")

    def build(worker):
        handles = worker.dataflow(_slow_dataflow)
        handles["nums"].insert(1)
        handles["nums"].advance_to(1)
        worker.step_until(handles["probe"], 1)

    tp.execute(build)
    err = capfd.readouterr().err
    assert "worker 0: waiting for the probe to pass 1" in err and "'Input' at 1" in err
