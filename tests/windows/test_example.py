"""examples/windows.py runs as a script and its every change is what the from-scratch
reference says, at every time, on one worker and on two inline workers."""

from __future__ import annotations

import importlib.util
import subprocess
import sys

import pytest
from support.paths import EXAMPLES

from timelypy.testing import contents_at
from timelypy.windows import Session, Sliding, Tumbling

from . import reference as ref


def load():
    spec = importlib.util.spec_from_file_location("examples_windows", EXAMPLES / "windows.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _by_time(changes):
    out = {}
    for record, time, diff in changes:
        out.setdefault(time, []).append((record, diff))
    return out


@pytest.mark.parametrize("workers", [1, 2])
def test_example_matches_the_reference_at_every_time(workers):
    example = load()
    got = {name: _by_time(c) for name, c in example.run(workers=workers).items()}
    clicks = [(page, click, click[1], t, 1) for (page, click), t, _ in example.stamped()]
    by_user = [(c[0], (page, c[1]), et, t, d) for page, c, et, t, d in clicks]
    for time in range(300):
        tumbling = ref.window_records(clicks, Tumbling(60), 20, None, time)
        want = {
            "tumbling": ref.counts(tumbling),
            "late": ref.late(clicks, Tumbling(60), 20, time),
            "sliding": ref.counts(ref.window_records(clicks, Sliding(60, 30), 0, None, time)),
            "sessions": ref.counts(ref.window_records(by_user, Session(30), 0, None, time)),
        }
        for name, content in want.items():
            assert contents_at(got[name], time) == content, (name, time)


def test_example_runs_as_a_script_and_shows_a_late_click_and_a_correction():
    done = subprocess.run(
        [sys.executable, str(EXAMPLES / "windows.py")], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "tumbling:"
    assert "  t= 71 + [  0,  60) home: 4" in lines  # a click within the lateness
    assert "  t= 71 - [  0,  60) home: 3" in lines
    assert "  t= 94 + [  0,  60) cart: ('ann', 12)" in lines  # too late: reported
    assert "  t= 50 + [  3,  50) ann: 2" in lines  # a session of two clicks
