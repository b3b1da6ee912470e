"""``examples/recovery.py`` runs and prints what it promises: a crash, a restore onto another
number of workers, and the counts of a run that never stopped."""

from __future__ import annotations

import importlib.util

import pytest
from support.paths import ROOT


def load():
    path = ROOT / "examples" / "recovery.py"
    spec = importlib.util.spec_from_file_location("examples_recovery", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


EXPECTED = [
    "ran to time 7 on 2 worker(s); last checkpoint at 6",
    "restored on 3 worker(s) at time 6",
    "after 10 rounds: 8 words, equal to a run that never stopped",
]


@pytest.mark.timeout(120)
def test_the_recovery_example_restores_a_crashed_session():
    assert load().main() == EXPECTED


@pytest.mark.processes
@pytest.mark.timeout(240)
def test_the_recovery_example_on_worker_processes():
    lines = load().main("processes", 2, 1)
    assert lines[1] == "restored on 1 worker(s) at time 6"
    assert lines[2] == EXPECTED[2]


@pytest.mark.ray
@pytest.mark.timeout(300)
def test_the_recovery_example_on_ray(ray_session):
    lines = load().main("ray", 2, 3)
    assert lines == EXPECTED
