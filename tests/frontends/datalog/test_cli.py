"""``timelypy datalog``: Soufflé-like outputs (checked against the evaluator), --watch applying
later .facts and .delta changes (a bounded run, ended by SIGINT and by --watch-for), errors."""

from __future__ import annotations

import os
import pathlib
import signal
import subprocess
import sys
import time
from typing import Callable, List

import pytest
from oracle.datalog import evaluate
from support.datalog_programs import CLASSIC
from support.paths import ROOT

from timelypy.datalog import Program
from timelypy.frontends.datalog.facts import format_fact

pytestmark = pytest.mark.timeout(300)

TC = CLASSIC["transitive_closure"].text


def command(*args: str) -> List[str]:
    return [sys.executable, "-m", "timelypy", "datalog", *args]


def environment() -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TIMELYPY_")}
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    return env


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        command(*args), env=environment(), capture_output=True, text=True, timeout=240
    )


def write_facts(directory: pathlib.Path, facts: dict) -> None:
    directory.mkdir(exist_ok=True)
    for name, rows in facts.items():
        (directory / f"{name}.facts").write_text("".join(format_fact(r) + "\n" for r in rows))


def csv_rows(path: pathlib.Path) -> List[str]:
    return path.read_text().splitlines()


def expected_lines(text: str, relation: str, facts: dict) -> List[str]:
    rows = evaluate(text, facts)[relation]
    return [format_fact(r) for r in sorted(rows)]


@pytest.mark.parametrize("name", ["transitive_closure", "points_to", "aggregates"])
def test_outputs_like_souffle(tmp_path, name):
    case = CLASSIC[name]
    (tmp_path / "p.dl").write_text(case.text)
    write_facts(tmp_path / "facts", case.small)
    done = run(str(tmp_path / "p.dl"), "-F", str(tmp_path / "facts"), "-D", str(tmp_path / "out"))
    assert done.returncode == 0, done.stderr
    for relation in Program.from_text(case.text).outputs:
        got = csv_rows(tmp_path / "out" / f"{relation}.csv")
        assert got == expected_lines(case.text, relation, case.small), relation


def test_dash_prints_the_outputs_to_standard_output(tmp_path):
    (tmp_path / "p.dl").write_text(TC)
    facts = CLASSIC["transitive_closure"].small
    write_facts(tmp_path / "f", facts)
    done = run(str(tmp_path / "p.dl"), "-F", str(tmp_path / "f"), "-D", "-")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[:4] == ["-" * 15, "path", "x\ty", "=" * 15] and lines[-1] == "=" * 15
    assert lines[4:-1] == expected_lines(TC, "path", facts)
    assert not (tmp_path / "-").exists()


def test_two_workers_on_processes(tmp_path):
    (tmp_path / "p.dl").write_text(TC)
    facts = CLASSIC["transitive_closure"].generate(30, 1)
    write_facts(tmp_path / "f", facts)
    done = run(
        str(tmp_path / "p.dl"), "-F", str(tmp_path / "f"), "-D", str(tmp_path / "o"),
        "--workers", "2", "--backend", "processes",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert csv_rows(tmp_path / "o" / "path.csv") == expected_lines(TC, "path", facts)


def eventually(check: Callable[[], bool], what: str, bound: float = 60.0) -> None:
    deadline = time.monotonic() + bound
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.1)
    raise AssertionError(f"not within {bound} s: {what}")


def test_watch_applies_facts_and_delta_changes(tmp_path):
    (tmp_path / "p.dl").write_text(TC)
    write_facts(tmp_path / "f", {"edge": [(1, 2), (2, 3)]})
    out = tmp_path / "o" / "path.csv"
    proc = subprocess.Popen(
        command(
            str(tmp_path / "p.dl"), "-F", str(tmp_path / "f"), "-D", str(tmp_path / "o"),
            "--watch", "--interval", "0.1", "--watch-for", "200",
        ),
        env=environment(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:

        def shows(*edges: tuple) -> Callable[[], bool]:
            want = expected_lines(TC, "path", {"edge": list(edges)})
            return lambda: out.is_file() and csv_rows(out) == want

        eventually(shows((1, 2), (2, 3)), "the first evaluation")
        with open(tmp_path / "f" / "edge.delta", "a") as f:
            f.write("+\t3\t4\n-\t1\t2\n+\t4")  # the last line is not complete yet
            f.flush()
            eventually(shows((2, 3), (3, 4)), "the delta's complete lines")
            f.write("\t1\n")
        eventually(shows((2, 3), (3, 4), (4, 1)), "the completed line")
        (tmp_path / "f" / "edge.facts").write_text("2\t3\n5\t6\n")  # 1 2 gone (already), 5 6 new
        eventually(shows((2, 3), (3, 4), (4, 1), (5, 6)), "the edited facts file")
        (tmp_path / "f" / "edge.delta").write_text("+\tnope\t1\n")  # a bad line: skipped
        (tmp_path / "f" / "edge.facts").write_text("5\t6\n")
        eventually(shows((3, 4), (4, 1), (5, 6)), "the facts file after a bad delta")
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0, err
    assert "skipped:" in err and "edge.delta:1" in err and "stopped" in err


def test_watch_for_bounds_the_run(tmp_path):
    (tmp_path / "p.dl").write_text(TC)
    write_facts(tmp_path / "f", {"edge": [(1, 2)]})
    started = time.monotonic()
    done = run(
        str(tmp_path / "p.dl"), "-F", str(tmp_path / "f"), "-D", str(tmp_path / "o"),
        "--watch", "--watch-for", "1",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert time.monotonic() - started < 200
    assert csv_rows(tmp_path / "o" / "path.csv") == ["1\t2"]


def test_errors(tmp_path):
    (tmp_path / "bad.dl").write_text(TC + "path(x, y) :- edge(x).\n")
    (tmp_path / "f").mkdir()
    done = run(str(tmp_path / "bad.dl"), "-F", str(tmp_path / "f"), "-D", str(tmp_path / "o"))
    assert done.returncode == 1 and f"{tmp_path / 'bad.dl'}:9:15:" in done.stderr
    (tmp_path / "p.dl").write_text(TC)
    (tmp_path / "f" / "edge.facts").write_text("1\t2\n3\n")
    done = run(str(tmp_path / "p.dl"), "-F", str(tmp_path / "f"), "-D", str(tmp_path / "o"))
    assert done.returncode == 1 and "edge.facts:2:" in done.stderr and "edge" in done.stderr
    done = run(str(tmp_path / "p.dl"), "-F", str(tmp_path / "nowhere"))
    assert done.returncode == 2 and "no facts directory" in done.stderr
    done = run(str(tmp_path / "p.dl"), "-F", str(tmp_path / "f"), "--backend", "nope")
    assert done.returncode == 2 and "unknown backend 'nope'" in done.stderr
