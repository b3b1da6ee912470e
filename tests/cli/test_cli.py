"""The `timelypy` command line: help, run with workers and backend, examples, bench."""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys
import textwrap

import pytest
from support.paths import ROOT
from typer.testing import CliRunner

from timelypy.cli import app

pytestmark = pytest.mark.timeout(300)

COMMANDS = ("run", "examples", "bench", "graph", "datalog")


def timelypy(*args: str, timeout: float = 240) -> subprocess.CompletedProcess:
    """The CLI as a user runs it: ``python -m timelypy ...`` in a fresh interpreter, with no
    run defaults inherited from the test's environment."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("TIMELYPY_")}
    return subprocess.run(
        [sys.executable, "-m", "timelypy", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


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
    done = timelypy(
        "run", str(program), "--workers", "2", "--backend", "processes", "--", "a", "--b"
    )
    assert done.returncode == 0, done.stderr
    # Two worker processes, neither of them the CLI's, and the program's own arguments.
    assert done.stdout.strip() == "['a', '--b'] [(0, 2), (1, 2)] 2"
    done = timelypy("run", str(program))
    assert done.stdout.strip() == "[] [(0, 1)] 1"


def test_run_skip_level_on_two_processes_gives_the_one_worker_output():
    one = subprocess.run(
        [sys.executable, "examples/skip_level.py"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
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
    direct = subprocess.run(
        [sys.executable, "examples/hello.py"], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    done = timelypy("examples", "hello")
    assert done.returncode == 0, done.stderr
    assert done.stdout == direct.stdout and "hello 9" in done.stdout
    result = CliRunner().invoke(app, ["examples", "no_such_example"])
    assert result.exit_code == 2 and "skip_level" in result.output


def test_examples_with_arguments_and_workers():
    done = timelypy("examples", "skip_level", "--workers", "2", "--", "200")
    assert done.returncode == 0, done.stderr
    direct = subprocess.run(
        [sys.executable, "examples/skip_level.py", "200"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.stdout == direct.stdout and "output updates" in done.stdout


def test_bench_lists_and_runs_with_json():
    result = CliRunner().invoke(app, ["bench"])
    assert result.exit_code == 0, result.output
    assert {line.split()[0] for line in result.stdout.splitlines()} == {
        p.stem for p in (ROOT / "benchmarks").glob("*.py") if p.stem != "common"
    }
    done = timelypy("bench", "linear_fusion", "--size", "500", "--json", "--", "--repeat", "1")
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["benchmark"] == "linear_fusion"
    assert result["parameters"]["records"] == 500 and result["parameters"]["repeat"] == 1


def test_bench_unknown_name():
    result = CliRunner().invoke(app, ["bench", "nope"])
    assert result.exit_code == 2 and "wordcount" in result.output


def test_version():
    import timelypy as tp

    result = CliRunner().invoke(app, ["--version"])
    assert result.exit_code == 0 and result.stdout.strip() == f"timelypy {tp.__version__}"
    done = timelypy("-V")
    assert done.returncode == 0 and done.stdout.strip() == f"timelypy {tp.__version__}"


FAILING = textwrap.dedent("""\
    import timelypy as tp

    def dataflow(scope):
        nums_in, nums = scope.new_collection()
        return nums_in, nums.map(lambda x: 12 // x).probe()

    def build(worker):
        nums_in, probe = worker.dataflow(dataflow)
        nums_in.insert(worker.index)
        nums_in.advance_to(1)
        nums_in.flush()
        worker.step_until(probe, 1, timeout=60)

    if __name__ == "__main__":
        tp.execute(build)
""")


@pytest.mark.parametrize("backend", ["inline", "processes"])
def test_run_prints_the_users_error_and_frames_concisely(tmp_path, backend):
    program = tmp_path / "divide.py"
    program.write_text(FAILING)
    done = timelypy("run", str(program), "--workers", "2", "--backend", backend)
    assert done.returncode == 1, done.stderr
    lines = done.stderr.strip().splitlines()
    assert (
        lines[0].startswith("Error: ")
        and "OperatorError: operator 'Linear[map]' on worker "
        "0 raised ZeroDivisionError: integer division or modulo by zero while processing "
        "record 0 at time 0 with diff 1"
        in lines[0]
    )
    frames = [line.split(", in ")[1].split()[0] for line in lines if line.startswith("  File")]
    assert frames == ["<module>", "build", "<lambda>"]  # the user's calls, outermost first
    assert f'  File "{program}", line 5, in <lambda>' in done.stderr
    assert "return nums_in, nums.map(lambda x: 12 // x).probe()" in done.stderr
    assert ("[worker 0]" in done.stderr) == (backend == "processes")  # from a worker's text
    assert "timelypy/" not in done.stderr and len(lines) <= 10
    assert "--verbose" in lines[-1]

    verbose = timelypy("run", str(program), "--workers", "2", "--backend", backend, "--verbose")
    assert verbose.returncode == 1
    assert verbose.stderr.startswith("Traceback (most recent call last):")
    assert "timelypy/progress/subgraph.py" in verbose.stderr  # the internals, all of them
    assert f'  File "{program}", line 5, in <lambda>' in verbose.stderr
    assert len(verbose.stderr.splitlines()) > 3 * len(lines)


def test_run_concise_report_of_a_plain_python_error(tmp_path):
    program = tmp_path / "plain.py"
    program.write_text("def f(d):\n    return d['missing']\n\nf({})\n")
    result = CliRunner().invoke(app, ["run", str(program)])
    assert result.exit_code == 1
    assert result.output.splitlines()[:5] == [
        "Error: KeyError: 'missing'",
        "Your code (most recent call last):",
        f'  File "{program}", line 4, in <module>',
        "    f({})",
        f'  File "{program}", line 2, in f',
    ]
    exits = tmp_path / "exits.py"
    exits.write_text("import sys\nsys.exit(3)\n")
    assert timelypy("run", str(exits)).returncode == 3  # a program's own exit code stays


FLOWS = textwrap.dedent("""\
    import sys

    def build(worker):
        def dataflow(scope):
            nums_in, nums = scope.new_collection()
            doubled = nums.map(lambda x: 2 * x)
            return nums_in, doubled.probe(), doubled.capture()

        nums_in, probe, out = worker.dataflow(dataflow)
        nums_in.insert(worker.index + 1)
        nums_in.advance_to(1)
        nums_in.flush()
        worker.step_until(probe, 1, timeout=60)
        return out.consolidated()

    def main():
        print("main", sys.argv)
""")


def _timelypy_in(directory: pathlib.Path, *args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TIMELYPY_")}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    return subprocess.run(
        [sys.executable, "-m", "timelypy", *args],
        cwd=directory,
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
    )


def test_run_module_function_from_the_current_directory(tmp_path):
    (tmp_path / "flows.py").write_text(FLOWS)
    done = _timelypy_in(tmp_path, "run", "flows:build", "-w", "2", "-b", "processes")
    assert done.returncode == 0, done.stderr
    # a build(worker): run on two worker processes (which import flows too), results printed
    assert done.stdout.splitlines() == ["worker 0: [(2, 0, 1)]", "worker 1: [(4, 0, 1)]"]
    done = _timelypy_in(tmp_path, "run", "flows:main", "--", "a", "--b")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "main ['flows:main', 'a', '--b']"


def test_misspelt_names_get_suggestions(tmp_path):
    (tmp_path / "flows.py").write_text(FLOWS)
    cases = [
        (["run", "flows:biuld"], "module 'flows' has no 'biuld' (did you mean 'build'?)"),
        (["run", "flow:build"], "no module named 'flow' in the current directory"),
        (["run", "flows:build", "--backend", "proceses"], "(did you mean 'processes'?)"),
        (["run", "flowz.py"], "no program file 'flowz.py' (did you mean 'flows.py'?)"),
        (["rnu", "flows.py"], "Did you mean 'run'?"),
        (["examples", "skip_levl"], "no example named 'skip_levl' (did you mean 'skip_level'?)"),
        (["bench", "wordcont"], "(did you mean 'wordcount'?)"),
        (["graph", "flows.py", "--format", "pgn"], "(did you mean 'png'?)"),
    ]
    for args, expected in cases:
        done = _timelypy_in(tmp_path, *args)
        assert done.returncode == 2, (args, done.stderr)
        assert expected in " ".join(done.stderr.split()), (args, done.stderr)
        if args[0] == "run" and args[1] == "flow:build":
            assert "(did you mean 'flows'?)" in done.stderr


def test_graph_reports_the_programs_error_concisely(tmp_path):
    program = tmp_path / "divide.py"
    program.write_text(FAILING)
    result = CliRunner().invoke(app, ["graph", str(program)])
    assert result.exit_code == 1
    assert "OperatorError: operator 'Linear[map]' on worker 0" in result.output
    assert f'  File "{program}", line 5, in <lambda>' in result.output
    assert "timelypy/" not in result.output
