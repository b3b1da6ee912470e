"""The property suite takes both paths: columns where records fit, objects elsewhere.

The backbone (``test_differential_property``, ``test_temporal_property``, ``test_join_fuel``)
runs each random example in one ``TIMELYPY_COLUMNS`` mode, half of them each (see
:mod:`support.columns`). These tests check that the split is real: random programs do seal and
keep column batches in ``auto``; ``off`` reaches every worker, worker processes included (the
harness asserts that no batch was sealed as columns); and the mode a test sets does not leak
into the next.
"""

from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, given, settings
from oracle import reference as ref
from support import columns as col
from support import strategies as strat
from support.harness import run_and_check
from support.strategies import program_and_script

from timelypy.differential.trace.layout import COLUMNS_VARIABLE

# Join(Input(0), Input(1)) keeps both inputs arranged by key: (int, int) records, columns.
JOIN = ref.Program(ref.Join(ref.Input(0), ref.Input(1)), 2)
# The same join after `widen` on one side: ints beyond int64 there, objects.
WIDE_JOIN = ref.Program(ref.Join(ref.Map(ref.Input(0), "widen"), ref.Input(1)), 2)
SCRIPT = [
    *[("update", i % 2, (i % 4, i % 3), 1) for i in range(12)],
    ("advance", 0, 1),
    ("advance", 1, 1),
    ("step", 3),
    *[("update", i % 2, (i % 4, i % 3), -1) for i in range(0, 12, 3)],
    ("update_at", 0, (1, 7), 2, 1),
    ("advance", 0, 2),
    ("advance", 1, 2),
    ("step", 3),
]


def _usage(program: ref.Program, mode: str, **options) -> col.Usage:
    before = len(col.USAGE)
    run_and_check(program, col.Script(SCRIPT, mode), 2, **options)
    (usage,) = col.USAGE[before:]
    assert usage.mode == mode
    return usage


@pytest.mark.parametrize(
    "backend,workers",
    [("inline", 1), ("inline", 2), pytest.param("processes", 2, marks=pytest.mark.processes)],
)
def test_each_mode_reaches_every_worker(backend: str, workers: int) -> None:
    """``auto`` keeps the join's arrangements as columns; ``off`` seals none on any worker
    (worker processes are forked from a server started before the test set the mode: the
    harness sets it in each worker)."""
    auto = _usage(JOIN, "auto", workers=workers, backend=backend)
    assert auto.arrangements >= 2 * workers
    assert auto.sealed_columns > 0 and auto.column_batches > 0, auto
    off = _usage(JOIN, "off", workers=workers, backend=backend)
    assert off.arrangements == auto.arrangements
    assert off.sealed_columns == 0 and off.column_batches == 0, off


@pytest.mark.ray
def test_each_mode_reaches_every_ray_worker(ray_session) -> None:
    """As on the other backends: Ray's worker processes started with the cluster, so the
    harness sets the mode in each actor, for the run, and puts it back (the next ``auto`` run
    seals columns again: ``off`` did not stay)."""
    auto = _usage(JOIN, "auto", workers=2, backend="ray")
    assert auto.sealed_columns > 0 and auto.column_batches > 0, auto
    off = _usage(JOIN, "off", workers=2, backend="ray")
    assert off.sealed_columns == 0 and off.column_batches == 0, off
    again = _usage(JOIN, "auto", workers=2, backend="ray")
    # (how many batches each worker seals depends on when the paced workers step)
    assert again.sealed_columns > 0 and again.column_batches > 0, again


def test_records_that_do_not_fit_stay_objects() -> None:
    """Values beyond int64 on one side: that side's batches are objects, the other's columns,
    and the answers are the reference's (run_and_check)."""
    usage = _usage(WIDE_JOIN, "auto")
    assert usage.sealed_columns > 0 and usage.sealed_objects > 0, usage


def test_the_mode_does_not_leak() -> None:
    saved = os.environ.get(COLUMNS_VARIABLE)
    _usage(JOIN, "off", workers=3)
    assert os.environ.get(COLUMNS_VARIABLE) == saved


def _arranges(program: ref.Program) -> bool:
    """The program keeps an arrangement (a join, semijoin or antijoin at the root scope)."""
    return any(type(n).__name__ in ("Join", "Semijoin", "Antijoin") for n in program.output.walk())


def test_random_programs_take_both_paths() -> None:
    """Random programs with joins, in ``auto``: arrangements seal column batches and keep them
    (so the backbone's examples in ``auto`` do test the column path), and some seal object
    batches too (text records, ints beyond int64). Derandomized: the same examples each run."""
    before = len(col.USAGE)

    @settings(
        max_examples=40,
        derandomize=True,
        deadline=None,
        suppress_health_check=[
            HealthCheck.too_slow,
            HealthCheck.data_too_large,
            HealthCheck.filter_too_much,
        ],
    )
    @given(program_and_script(strat.programs(max_depth=4).filter(_arranges), columns=["auto"]))
    def run(case: tuple) -> None:
        program, script, n_inputs = case
        run_and_check(program, script, n_inputs, workers=1)

    run()
    runs = col.USAGE[before:]
    assert all(u.mode == "auto" for u in runs)
    assert sum(u.column_batches > 0 for u in runs) >= 3, runs
    assert any(u.sealed_objects > 0 for u in runs), runs
