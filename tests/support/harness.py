"""Runs a reference program on the engine under a driver script and checks its outputs.

The differential correctness property: for every time t, the sum of all output updates at times <= t
equals the program evaluated from scratch on the sum of all input updates at times <= t.

A script that names a ``TIMELYPY_COLUMNS`` mode (a :class:`~support.columns.Script`) runs in it,
on every worker (see :mod:`support.columns`); each run's use of the column path is recorded in
``support.columns.USAGE``.
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence, Tuple

import cloudpickle
from oracle import reference as ref

import timelypy as tp

from . import columns as col

# Worker processes and Ray actors do not have tests/ on their path: ship these modules by value.
cloudpickle.register_pickle_by_value(ref)
cloudpickle.register_pickle_by_value(col)


STEP_TIMEOUT = 120


def make_build(
    program: Any,
    script: Sequence[tuple],
    n_inputs: int,
    check_promptly: bool,
    direct: bool = False,
    columns: Optional[str] = None,
    report_usage: bool = False,
):
    """A ``build(worker)`` that drives ``script`` and returns the worker's output updates and
    its problems (and, with ``report_usage``, its :class:`~support.columns.Usage` as a dict).

    Updates are spread over workers (action k is performed by worker k % peers); every worker
    performs every advance, so all workers' sessions move in lockstep. ``direct``: build with
    the Collection methods (``reference.build_direct``) instead of through the plan.
    ``columns``: the ``TIMELYPY_COLUMNS`` mode the worker builds and runs in (None: the mode
    ``script`` names, if any, else the worker's environment).
    """
    if columns is None:
        columns = col.mode_of(script)
    script = list(script)
    builder = ref.build_direct if direct else ref.build

    def build(worker):
        with col.columns_mode(columns):
            return _build(worker)

    def _build(worker):
        def dataflow(scope):
            sessions, collections = [], []
            for i in range(n_inputs):
                s, c = scope.new_collection(name=f"in{i}")
                sessions.append(s)
                collections.append(c)
            out = builder(program, scope, collections)
            return sessions, out.probe(), out.capture(), scope

        sessions, probe, captured, root = worker.dataflow(dataflow)
        checked_upto = 0
        problems: List[str] = []
        updates_so_far: Dict[int, List[Tuple[Any, Any, int]]] = {i: [] for i in range(n_inputs)}
        for k, action in enumerate(script):
            kind = action[0]
            mine = (k % worker.peers) == worker.index
            if kind == "update":
                _, i, rec, diff = action
                updates_so_far[i].append((rec, sessions[i].time, diff))
                if mine:
                    sessions[i].update(rec, diff)
            elif kind == "update_at":
                _, i, rec, offset, diff = action
                t = sessions[i].time + offset
                updates_so_far[i].append((rec, t, diff))
                if mine:
                    sessions[i].update_at(rec, t, diff)
            elif kind == "advance":
                _, i, new_time = action
                sessions[i].advance_to(new_time)
                sessions[i].flush()
            elif kind == "close":
                sessions[action[1]].close()
            elif kind == "step":
                for s in sessions:
                    s.flush()
                for _ in range(action[1]):
                    worker.step()
                if check_promptly:
                    # Every time the probe has passed must already be exact.
                    while probe.frontier and not probe.less_equal(checked_upto):
                        expected = ref.evaluate_at(program, updates_so_far, checked_upto)
                        got = captured.at(checked_upto)
                        if got != expected:
                            problems.append(
                                f"at time {checked_upto} (closed during the run): "
                                f"expected {expected}, got {got}"
                            )
                        checked_upto += 1
        kept = col.column_use(root, columns).column_batches  # before completion drops traces
        for s in sessions:
            s.close()
        worker.step_until_done(timeout=STEP_TIMEOUT)
        usage = col.column_use(root, columns)  # every batch sealed
        usage.column_batches = kept
        if report_usage:
            return captured.updates(), problems, vars(usage)
        return captured.updates(), problems

    return build


def run_and_check(
    program: Any,
    script: Sequence[tuple],
    n_inputs: int,
    *,
    workers: int = 1,
    backend: str = "inline",
    direct: bool = False,
    columns: Optional[str] = None,
) -> List[Tuple[Any, Any, int]]:
    """Run ``program`` under ``script`` and check every time's accumulated output against the
    reference; returns the output updates. ``columns``: the ``TIMELYPY_COLUMNS`` mode (None:
    the one ``script`` names, if any, else the environment's). With ``off``, no batch may be
    sealed as columns on any worker."""
    mode = col.mode_of(script) if columns is None else columns
    build = make_build(
        program,
        script,
        n_inputs,
        check_promptly=(workers == 1),
        direct=direct,
        columns=mode,
        report_usage=True,
    )
    with col.columns_mode(mode):  # for inline workers (threads); processes set it themselves
        results = tp.execute(build, workers=workers, backend=backend, timeout=300)
    updates: List[Tuple[Any, Any, int]] = []
    usage = col.Usage(mode)
    for worker_updates, problems, worker_usage in results:
        assert not problems, f"program {program!r} (columns={mode}): " + "; ".join(problems)
        updates.extend(worker_updates)
        usage.add(col.Usage(**worker_usage))
    col.USAGE.append(usage)
    if mode == "off":
        assert usage.sealed_columns == 0, f"TIMELYPY_COLUMNS=off did not reach the workers: {usage}"
    by_input = ref.script_updates(script, n_inputs)
    horizon = max(
        [t for us in by_input.values() for _, t, _ in us] + ref.final_times(script, n_inputs) + [0]
    )
    if ref.is_temporal(program):  # records leave (and freeze) after the inputs' last time
        horizon += ref.BOUND_MAX + 1
    for t in range(horizon + 1):
        expected = ref.evaluate_at(program, by_input, t)
        got = ref.accumulate(updates, t)
        assert got == expected, (
            f"program {program!r} at time {t} (columns={mode}): expected {expected}, got {got}\n"
            f"script={list(script)!r}"
        )
    return updates
