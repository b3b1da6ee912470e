"""Incremental Datalog beside pydbsp and DuckDB: initial evaluation and latency per fact change.

Three classic programs (``benchmarks/datalog_peers/workloads.py`` has them and their
generators): transitive closure of a random graph (``--nodes``, ``--edges``), same generation on
a random tree (``--sg-nodes``, ``--fanout``) and Andersen's points-to analysis of a generated
program of ``--statements`` statements (address-of, copy, load, store). For each, every system
runs in a fresh process of its own (``datalog_peers/peer.py``), regenerating the same seeded
facts and ``--changes`` changes:

1. load the input facts and evaluate until the output is complete: ``initial_s``;
2. closed loop: insert or remove one fact (alternately), then wait until the output is complete
   again: median / p90 / p99 µs per change;
3. the output's size and a digest (SHA-256 of the sorted facts), after step 1 and after step 2:
   every system must give the same (``agree``); ``--check`` also compares with a from-scratch
   semi-naive evaluation in plain Python.

Systems (``--systems``):

* ``timelypy``: the Datalog front-end (``timelypy.datalog``; ``--workers``, ``--backend``;
  ``--timelypy-path direct`` runs the compiled plans on a bare ``open_session`` instead);
* ``duckdb``: the facts in tables, the program as one ``WITH RECURSIVE`` query recomputed into a
  table after every change (``--duckdb-threads``, 0 = DuckDB's default: every core);
* ``pydbsp``: pure-Python DBSP (its incremental Datalog body, the same rules as its terms). It
  needs Python >= 3.12: ``--pydbsp-python`` (or ``TIMELYPY_PYDBSP_PYTHON``) names an interpreter
  that has it, e.g. a virtual environment made with ``python3.12 -m venv DIR && DIR/bin/pip
  install pydbsp``; without one the column says why it is unavailable.

Every phase reports the process's peak resident memory (``peak_rss_mb``); a system's process
gets at most ``--memory-limit-gb`` of address space (pydbsp keeps every intermediate Z-set: it
needs about 17 GB for the transitive closure of 10^4 edges). A system that exceeds
``--timeout`` seconds is stopped; what it measured by then is kept
(``"timed_out": true``); ``--change-budget`` bounds the seconds a system spends on changes
(fewer changes than asked then, ``"complete": false``, and no final digest comparison).

    python benchmarks/datalog.py --workloads tc sg andersen --nodes 10000 --edges 10000 \\
        --sg-nodes 1000 --statements 10000 --changes 200
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
from typing import Any, Dict, List, Optional, Tuple

from common import emit, environment, note, speedup

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
PEER = os.path.join(HERE, "datalog_peers", "peer.py")
sys.path.insert(0, os.path.join(HERE, "datalog_peers"))

import workloads  # noqa: E402

SYSTEMS = ("timelypy", "duckdb", "pydbsp")


def specs(args: argparse.Namespace) -> List[Dict[str, Any]]:
    """One workload spec per ``--workloads`` entry, from the size arguments."""
    common = {"changes": args.changes, "seed": args.seed}
    by_name = {
        "tc": {"workload": "tc", "nodes": args.nodes, "edges": args.edges},
        "sg": {"workload": "sg", "nodes": args.sg_nodes, "fanout": args.fanout},
        "andersen": {
            "workload": "andersen",
            "statements": args.statements,
            "function_size": args.function_size,
        },
    }
    return [{**by_name[name], **common} for name in args.workloads]


def pydbsp_python(given: Optional[str]) -> Tuple[Optional[str], str]:
    """An interpreter that can import pydbsp, or ``None`` and the reason."""
    candidates: List[str] = []
    if given:
        candidates.append(given)
    else:
        if os.environ.get("TIMELYPY_PYDBSP_PYTHON"):
            candidates.append(os.environ["TIMELYPY_PYDBSP_PYTHON"])
        candidates.append(sys.executable)
        for name in ("python3.14", "python3.13", "python3.12"):
            found = shutil.which(name)
            if found:
                candidates.append(found)
    tried = []
    for python in candidates:
        try:
            probe = subprocess.run(
                [python, "-c", "import sys, pydbsp; print(sys.version.split()[0])"],
                capture_output=True,
                text=True,
                timeout=60,
                env=_env_without_checkout(),
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            tried.append(f"{python}: {exc}")
            continue
        if probe.returncode == 0:
            return python, probe.stdout.strip()
        lines = probe.stderr.strip().splitlines() or ["no output"]
        # A traceback ends with the error; a launcher's complaint (pyenv) starts with it.
        tried.append(f"{python}: {lines[-1] if 'Error' in lines[-1] else lines[0]}")
    return None, (
        "pydbsp needs Python >= 3.12 and no interpreter here imports it "
        f"(this one is {sys.version.split()[0]}; tried: {'; '.join(tried)}); make one with "
        "`python3.12 -m venv DIR && DIR/bin/pip install pydbsp` and pass "
        "--pydbsp-python DIR/bin/python"
    )


def _env_without_checkout() -> Dict[str, str]:
    """The environment for the pydbsp process: no PYTHONPATH (the checkout's timelypy needs
    this interpreter's packages, which another interpreter does not have)."""
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)
    return env


def run_system(
    system: str,
    spec: Dict[str, Any],
    python: str,
    options: Dict[str, Any],
    timeout: float,
    change_budget: float,
    memory_limit_gb: float,
) -> Dict[str, Any]:
    """Run one system on one workload in a fresh process; its phases' JSON lines, merged."""
    cmd = [
        python,
        PEER,
        "--system",
        system,
        "--spec",
        json.dumps(spec),
        "--options",
        json.dumps(options),
        "--change-budget",
        str(change_budget),
        "--memory-limit-gb",
        str(memory_limit_gb),
    ]
    env = _env_without_checkout() if system == "pydbsp" else dict(os.environ)
    if system != "pydbsp":
        env["PYTHONPATH"] = ROOT + os.pathsep + env.get("PYTHONPATH", "")
    note(f"datalog: {spec['workload']} on {system} ...")
    timed_out = False
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
        stdout, stderr, code = proc.stdout, proc.stderr, proc.returncode
    except subprocess.TimeoutExpired as exc:
        timed_out = True
        stdout = _text(exc.stdout)
        stderr = _text(exc.stderr)
        code = None
    result: Dict[str, Any] = {}
    for line in stdout.splitlines():
        try:
            phase = json.loads(line)
        except ValueError:
            continue
        result[phase.pop("phase")] = phase
    if timed_out:
        result["timed_out"] = True
        result["error"] = f"stopped after the time limit of {timeout:g} s"
    elif code != 0:
        tail = (stderr.strip().splitlines() or ["no output"])[-1]
        result["error"] = f"exit status {code}: {tail}"
    return result


def _text(data: Any) -> str:
    if data is None:
        return ""
    return data.decode(errors="replace") if isinstance(data, bytes) else str(data)


def reference(spec: Dict[str, Any]) -> Dict[str, Any]:
    """The from-scratch evaluation's output size and digest, before and after the changes."""
    wl = workloads.build(spec)
    facts = {rel: set(fs) for rel, fs in wl.facts.items()}
    initial = workloads.evaluate(wl.rules, facts)[wl.output]
    for rel, fact, diff in wl.changes:
        (facts[rel].add if diff > 0 else facts[rel].discard)(fact)
    final = workloads.evaluate(wl.rules, facts)[wl.output]
    return {
        "initial": {"output_size": len(initial), "digest": workloads.digest(initial)},
        "changes": {"output_size": len(final), "digest": workloads.digest(final)},
    }


def agreement(systems: Dict[str, Dict[str, Any]], ref: Optional[Dict[str, Any]]) -> Dict[str, Any]:
    """For each phase, the digests seen and whether every system that finished it agrees
    (with the reference too, under ``--check``)."""
    out: Dict[str, Any] = {}
    for phase in ("initial", "changes"):
        seen: Dict[str, str] = {}
        for name, r in systems.items():
            p = r.get(phase)
            if p and (phase == "initial" or p.get("complete")):
                seen[name] = p["digest"]
        if ref is not None:
            seen["reference"] = ref[phase]["digest"]
        out[phase] = {"digests": seen, "agree": len(set(seen.values())) <= 1 if seen else None}
    return out


def ratios(systems: Dict[str, Dict[str, Any]]) -> Dict[str, Optional[float]]:
    """Peer time over timelypy's time: initial evaluation and median / p99 change latency."""

    def get(name: str, *path: str) -> Optional[float]:
        x: Any = systems.get(name, {})
        for p in path:
            x = x.get(p) if isinstance(x, dict) else None
        return x if isinstance(x, (int, float)) else None

    out: Dict[str, Optional[float]] = {}
    for peer in ("duckdb", "pydbsp"):
        out[f"initial_{peer}_over_timelypy"] = speedup(
            get(peer, "initial", "initial_s"), get("timelypy", "initial", "initial_s")
        )
        for stat in ("median_us", "p99_us"):
            out[f"change_{stat[:-3]}_{peer}_over_timelypy"] = speedup(
                get(peer, "changes", "latency", stat), get("timelypy", "changes", "latency", stat)
            )
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workloads", nargs="+", choices=workloads.WORKLOADS, default=["tc"])
    ap.add_argument("--systems", nargs="+", choices=SYSTEMS, default=list(SYSTEMS))
    ap.add_argument("--nodes", type=int, default=10_000, help="tc: nodes of the random graph")
    ap.add_argument("--edges", type=int, default=10_000, help="tc: edges of the random graph")
    ap.add_argument("--sg-nodes", type=int, default=1_000, help="sg: nodes of the random tree")
    ap.add_argument("--fanout", type=int, default=4, help="sg: children per node at most")
    ap.add_argument("--statements", type=int, default=10_000, help="andersen: statements")
    ap.add_argument("--function-size", type=int, default=20, help="andersen: variables/function")
    ap.add_argument("--changes", type=int, default=100, help="fact changes (closed loop)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--workers", type=int, default=1, help="timelypy workers")
    ap.add_argument("--backend", default="inline", help="timelypy backend")
    ap.add_argument(
        "--timelypy-path",
        choices=("auto", "direct"),
        default="auto",
        help="auto: the timelypy.datalog session where it exists; direct: compile_program + "
        "plan.lower + open_session (the same compiled program without the session layer)",
    )
    ap.add_argument("--duckdb-threads", type=int, default=0, help="0: DuckDB's default")
    ap.add_argument("--pydbsp-python", default=None, help="an interpreter with pydbsp")
    ap.add_argument(
        "--pydbsp-compact",
        action="store_true",
        help="call pydbsp's Evaluator.compact() after every tick (its storage GC; off, as in "
        "its Datalog notebook)",
    )
    ap.add_argument("--timeout", type=float, default=1800.0, help="seconds per system and run")
    ap.add_argument(
        "--change-budget", type=float, default=600.0, help="seconds per system for the changes"
    )
    ap.add_argument(
        "--memory-limit-gb",
        type=float,
        default=8.0,
        help="address-space limit per system's process (0: none); a system that needs more "
        "stops with MemoryError, reported as its error",
    )
    ap.add_argument("--check", action="store_true", help="compare with a from-scratch evaluation")
    args = ap.parse_args()

    pydbsp_at, pydbsp_note = (None, "")
    if "pydbsp" in args.systems:
        pydbsp_at, pydbsp_note = pydbsp_python(args.pydbsp_python)
    options = {
        "timelypy": {
            "workers": args.workers,
            "backend": args.backend,
            "timeout": args.timeout,
            "direct": args.timelypy_path == "direct",
        },
        "duckdb": {"threads": args.duckdb_threads},
        "pydbsp": {"compact": args.pydbsp_compact},
    }
    results: Dict[str, Any] = {}
    for spec in specs(args):
        wl = workloads.build(spec)
        systems: Dict[str, Dict[str, Any]] = {}
        for system in args.systems:
            if system == "pydbsp" and pydbsp_at is None:
                systems[system] = {"unavailable": pydbsp_note}
                continue
            python = pydbsp_at if system == "pydbsp" else sys.executable
            assert python is not None
            systems[system] = run_system(
                system,
                spec,
                python,
                options[system],
                args.timeout,
                args.change_budget,
                args.memory_limit_gb,
            )
            if system == "pydbsp":
                systems[system]["python"] = pydbsp_note
        ref = reference(spec) if args.check else None
        results[spec["workload"]] = {
            "spec": wl.spec,
            "inputs": wl.sizes(),
            "systems": systems,
            "agreement": agreement(systems, ref),
            "ratios": ratios(systems),
        }
    emit(
        {
            "benchmark": "datalog",
            "environment": environment(),
            "params": vars(args),
            "workloads": results,
        }
    )


if __name__ == "__main__":
    main()
