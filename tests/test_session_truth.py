"""Driver sessions that tell the truth: a dead worker is named as the root cause, a wait that
would return before the data it should cover says so, and every wait honours its timeout while
operators work (advance_to returns once the workers hold the data; wait is where the computation
is awaited)."""

from __future__ import annotations

import io
import os
import random
import signal
import sys
import threading
import time
import warnings

import cloudpickle
import pytest

import timelypy as tp
from timelypy.errors import (PendingTimeWarning, StallError, WaitTimeoutError, WorkerDiedError,
                             WorkerError)

cloudpickle.register_pickle_by_value(sys.modules[__name__])


def numbers_dataflow(scope):
    nums_in, nums = scope.new_collection()
    counts = nums.map(lambda x: x % 7).count()
    return {"nums": nums_in, "probe": counts.probe(), "out": counts.capture()}


def _kill(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def _run_until_failure(s, kill, rng: random.Random) -> None:
    """Drive the session epoch after epoch; ``kill()`` the victim at a random moment: between
    two calls, or from another thread while a load or a wait is under way."""
    moment = rng.randrange(1, 6)
    during = rng.random() < 0.5
    for epoch in range(1, 10_000):
        if epoch == moment:
            if during:
                threading.Timer(rng.uniform(0.0, 0.02), kill).start()
            else:
                kill()
                time.sleep(rng.uniform(0.0, 0.3))
        s.update_many("nums", list(range(epoch * 500, epoch * 500 + 500)))
        s.advance_to(epoch)
        s.wait("probe")
        s.changes("out")


def _root_cause_is_named(backend: str, workers: int, rounds: int, seed: int) -> None:
    rng = random.Random(seed)
    for round_ in range(rounds):
        s = tp.open_session(numbers_dataflow, workers=workers, backend=backend, timeout=30)
        victim = rng.randrange(workers)
        pid = s.worker_pids[victim]
        try:
            with pytest.raises(WorkerError) as info:
                _run_until_failure(s, lambda: _kill(pid), rng)
            error = info.value
            assert type(error) is WorkerDiedError, (round_, victim, repr(error))
            assert error.worker == victim, (round_, victim, str(error))
            with pytest.raises(WorkerDiedError) as again:  # every later call: the same cause
                s.insert("nums", 1)
            assert again.value is error
        finally:
            s.abort()


@pytest.mark.processes
@pytest.mark.timeout(300)
def test_a_killed_worker_is_named_as_the_root_cause_on_processes():
    _root_cause_is_named("processes", 3, 20, seed=20)


@pytest.mark.ray
@pytest.mark.timeout(600)
def test_a_killed_worker_is_named_as_the_root_cause_on_ray(ray_session):
    _root_cause_is_named("ray", 2, 5, seed=5)
