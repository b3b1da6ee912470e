"""The `timelypy` command line: help, run with workers and backend, examples, bench."""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys
import textwrap

import pytest
from typer.testing import CliRunner

from timelypy.cli import app

pytestmark = pytest.mark.timeout(300)

ROOT = pathlib.Path(__file__).resolve().parent.parent
COMMANDS = ("run", "examples", "bench", "graph")


def timelypy(*args: str, timeout: float = 240) -> subprocess.CompletedProcess:
    """The CLI as a user runs it: ``python -m timelypy ...`` in a fresh interpreter, with no
    run defaults inherited from the test's environment."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("TIMELYPY_")}
    return subprocess.run([sys.executable, "-m", "timelypy", *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=timeout)


def test_help_lists_the_commands():
    result = CliRunner().invoke(app, ["--help"])
    assert result.exit_code == 0
    for command in COMMANDS:
        assert command in result.stdout
    for command in COMMANDS:
        sub = CliRunner().invoke(app, [command, "--help"])
        assert sub.exit_code == 0 and "Usage" in sub.stdout, command


def test_python_dash_m_timelypy_help():
    done = timelypy("--help")
    assert done.returncode == 0, done.stderr
    for command in COMMANDS:
        assert command in done.stdout


def test_console_script_is_declared():
    text = (ROOT / "pyproject.toml").read_text()
    assert 'timelypy = "timelypy.cli:main"' in text


PEERS = textwrap.dedent("""
    import os, sys
    import timelypy as tp

    if __name__ == "__main__":
        seen = tp.execute(lambda worker: (worker.index, worker.peers, os.getpid()))
        print(sys.argv[1:], [(i, p) for i, p, _ in seen], len({pid for _, _, pid in seen}))
""")


def test_run_passes_workers_backend_and_arguments(tmp_path):
    program = tmp_path / "peers.py"
    program.write_text(PEERS)
    done = timelypy("run", str(program), "--workers", "2", "--backend", "processes",
                    "--", "a", "--b")
    assert done.returncode == 0, done.stderr
    # Two worker processes, neither of them the CLI's, and the program's own arguments.
    assert done.stdout.strip() == "['a', '--b'] [(0, 2), (1, 2)] 2"
    done = timelypy("run", str(program))
    assert done.stdout.strip() == "[] [(0, 1)] 1"


def test_run_skip_level_on_two_processes_gives_the_one_worker_output():
    one = subprocess.run([sys.executable, "examples/skip_level.py"], cwd=ROOT,
                         capture_output=True, text=True, timeout=120)
    assert one.returncode == 0, one.stderr
    two = timelypy("run", "examples/skip_level.py", "--workers", "2", "--backend", "processes")
    assert two.returncode == 0, two.stderr
    assert two.stdout == one.stdout and len(one.stdout.splitlines()) == 32


def test_run_restores_the_environment(tmp_path, monkeypatch):
    monkeypatch.delenv("TIMELYPY_WORKERS", raising=False)
    program = tmp_path / "env.py"
    program.write_text("import os\nprint(os.environ['TIMELYPY_WORKERS'])\n")
    result = CliRunner().invoke(app, ["run", str(program), "--workers", "3"])
    assert result.exit_code == 0, result.output
    assert result.stdout.strip() == "3"
    assert "TIMELYPY_WORKERS" not in os.environ


def test_run_rejects_bad_options(tmp_path):
    program = tmp_path / "p.py"
    program.write_text("print('ran')\n")
    result = CliRunner().invoke(app, ["run", str(program), "--backend", "nowhere"])
    assert result.exit_code == 2 and "inline, processes, ray" in result.output
    result = CliRunner().invoke(app, ["run", str(tmp_path / "missing.py")])
    assert result.exit_code == 2 and "no program file" in result.output


def test_examples_lists_every_example_with_its_first_line():
    result = CliRunner().invoke(app, ["examples"])
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    names = [line.split()[0] for line in lines]
    assert names == sorted(p.stem for p in (ROOT / "examples").glob("*.py"))
    (skip,) = [line for line in lines if line.startswith("skip_level ")]
    assert "Skip-level management" in skip


def test_examples_runs_one_like_python_does():
    direct = subprocess.run([sys.executable, "examples/hello.py"], cwd=ROOT,
                            capture_output=True, text=True, timeout=120)
    done = timelypy("examples", "hello")
    assert done.returncode == 0, done.stderr
    assert done.stdout == direct.stdout and "hello 9" in done.stdout
    result = CliRunner().invoke(app, ["examples", "no_such_example"])
    assert result.exit_code == 2 and "skip_level" in result.output


def test_examples_with_arguments_and_workers():
    done = timelypy("examples", "skip_level", "--workers", "2", "--", "200")
    assert done.returncode == 0, done.stderr
    direct = subprocess.run([sys.executable, "examples/skip_level.py", "200"], cwd=ROOT,
                            capture_output=True, text=True, timeout=120)
    assert done.stdout == direct.stdout and "output updates" in done.stdout


def test_bench_lists_and_runs_with_json():
    result = CliRunner().invoke(app, ["bench"])
    assert result.exit_code == 0, result.output
    assert {line.split()[0] for line in result.stdout.splitlines()} == {
        p.stem for p in (ROOT / "benchmarks").glob("*.py") if p.stem != "common"}
    done = timelypy("bench", "linear_fusion", "--size", "500", "--json", "--", "--repeat", "1")
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["benchmark"] == "linear_fusion"
    assert result["parameters"]["records"] == 500 and result["parameters"]["repeat"] == 1


def test_bench_unknown_name():
    result = CliRunner().invoke(app, ["bench", "nope"])
    assert result.exit_code == 2 and "wordcount" in result.output
