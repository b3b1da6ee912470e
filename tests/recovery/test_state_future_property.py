"""The recovery property suite with temporal filters: random programs that include
``temporal_filter`` and ``freeze_at`` (so operators hold updates at future times at the
checkpoint), snapshotted at a random closed time, restored onto 1, 2 or 3 inline workers and
continued: every later time equals the from-scratch oracle and the uninterrupted run.

Longer run::

    TIMELYPY_EXAMPLES=2000 python -m pytest tests/recovery/test_state_future_property.py
"""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from oracle import reference as ref
from support import strategies as strat

from .test_state_property import EXAMPLES, RESCALES, SETTINGS, check_restore, program_and_script


def longer(script: Any, n_inputs: int) -> Any:
    """The script, then an update that cancels itself ``BOUND_MAX`` after its last time: the
    run (which stops after the last update's time) goes on while temporal filters still
    change the output."""
    updates = ref.script_updates(script, n_inputs)
    times = [t for ups in updates.values() for _, t, _ in ups]
    times += [a[2] for a in script if a[0] == "advance" and a[1] == 0]
    end = max(times, default=0) + ref.BOUND_MAX + 1
    return [*script, ("advance", 0, end), ("update", 0, (0, 0), 1), ("update", 0, (0, 0), -1)]


def check(case: Any, scale: Any, cut: int) -> None:
    program, script, n_inputs = case
    problem = check_restore(program, longer(script, n_inputs), n_inputs, scale[0], scale[1], cut)
    assert problem is None, f"{program}\n{problem}"


@SETTINGS
@given(
    program_and_script(strat.programs(max_depth=4, max_loops=0, temporal=True)),
    st.sampled_from(RESCALES),
    st.integers(0, 12),
)
def test_restore_random_temporal_programs(case, scale, cut):
    check(case, scale, cut)


@settings(SETTINGS, max_examples=max(20, EXAMPLES // 3))
@given(
    program_and_script(strat.iterative_programs(max_depth=3, temporal=True)),
    st.sampled_from(RESCALES),
    st.integers(0, 12),
)
def test_restore_random_iterative_temporal_programs(case, scale, cut):
    check(case, scale, cut)
