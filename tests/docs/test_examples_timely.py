"""The timely examples run and print exactly what they promise."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import textwrap

import pytest
from support.paths import EXAMPLES

pytestmark = pytest.mark.timeout(60)


def load(name: str):
    spec = importlib.util.spec_from_file_location(f"examples_{name}", EXAMPLES / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def expected(text: str) -> str:
    return textwrap.dedent(text).strip("\n")


HELLO = "\n".join(
    [
        line
        for epoch in range(10)
        for line in (
            [f"worker 0:\thello {epoch}"]
            + ([f"worker 0:\thello {100 + epoch}"] if epoch % 3 == 0 else [])
            + [f"epoch {epoch} complete: probe frontier [{epoch + 1}]"]
        )
    ]
    + ["done: True"]
)

LOOP_TO_100 = expected("""
    epoch 0: start   0 reached 100 after 100 iterations (left the loop at Product(0, 100))
    epoch 0: start  37 reached 100 after  63 iterations (left the loop at Product(0, 63))
    epoch 0: start  90 reached 100 after  10 iterations (left the loop at Product(0, 10))
    epoch 0: start 100 reached 100 after   0 iterations (left the loop at Product(0, 0))
    epoch 1: start   1 reached 100 after  99 iterations (left the loop at Product(1, 99))
    epoch 1: start  50 reached 100 after  50 iterations (left the loop at Product(1, 50))
    epoch 1: start  99 reached 100 after   1 iterations (left the loop at Product(1, 1))
    outside the loop: 7 records at epochs [0, 1]; complete: True
""")

EPOCH_COUNTS = expected("""
    epoch 0: send ['a', 'b', 'c'], ahead {3: ['x', 'y'], 5: ['z']}
      count: epoch 0 had 3 record(s)
    epoch 1: send ['d'], ahead {4: ['w']}
      count: epoch 1 had 1 record(s)
    epoch 2: send []
    epoch 3: send ['e', 'f'], ahead {5: ['v', 'u']}
      count: epoch 3 had 4 record(s)
    epoch 4: send ['g']
      count: epoch 4 had 2 record(s)
    epoch 5: send ['h']
      count: epoch 5 had 4 record(s)
    emitted in order: [(0, 3), (1, 1), (3, 4), (4, 2), (5, 4)]
    in time order: True; each epoch once: True; total records: 14
""")


def test_hello():
    assert load("hello").main() == HELLO


def test_loop_to_100():
    assert load("loop_to_100").main() == LOOP_TO_100


def test_epoch_counts():
    assert load("epoch_counts").main() == EPOCH_COUNTS


def test_examples_have_docstrings_and_main():
    for name in ("hello", "loop_to_100", "epoch_counts"):
        module = load(name)
        assert module.__doc__ and len(module.__doc__.strip()) > 80, name
        assert callable(module.main)


@pytest.mark.parametrize(
    "name, output", [("hello", HELLO), ("loop_to_100", LOOP_TO_100), ("epoch_counts", EPOCH_COUNTS)]
)
def test_example_runs_as_a_script(name, output):
    done = subprocess.run(
        [sys.executable, str(EXAMPLES / f"{name}.py")], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == output + "\n"
