"""Several workers, inline and as processes: same answers as one worker, errors, deaths, strays.

Every multi-worker job here is compared with the same program on one worker. Jobs are kept small
(process start-up is cheap with forkserver, but the file should stay well under a minute and a
half on two cores).
"""

from __future__ import annotations

import functools
import logging
import multiprocessing
import os
import random
import signal
import socket
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any, Callable, Dict, FrozenSet, List, Optional, Set, Tuple

import cloudpickle
import pytest

import timelypy as tp
from timelypy.errors import WaitTimeoutError, WorkerDiedError, WorkerError

# Builds shipped to worker processes reference functions of this module: send them by value.
cloudpickle.register_pickle_by_value(sys.modules[__name__])

# No test may hang the suite; tests that start processes set their own (tighter) limit.
pytestmark = pytest.mark.timeout(120)

SIZE = 24
"""People in the skip-level org chart (the book uses 10; a little more spreads over 3 workers)."""

Hook = Callable[[Any, int, Dict[str, Any]], None]


# ------------------------------------------------------------------------------------------
# helpers


def write_pid(pid_dir: Optional[Path], index: int) -> None:
    if pid_dir is None:
        return
    tmp = pid_dir / f"{index}.tmp"
    tmp.write_text(str(os.getpid()))
    os.replace(tmp, pid_dir / f"{index}.pid")


def pid_alive(pid: int) -> bool:
    """Whether ``pid`` is a live (not zombie) process."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # pragma: no cover - a reused pid of someone else
        return True
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _children_of(ppid: int) -> List[int]:
    out = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/status") as f:
                for line in f:
                    if line.startswith("PPid:"):
                        if int(line.split()[1]) == ppid:
                            out.append(int(entry))
                        break
        except OSError:
            continue
    return [pid for pid in out if pid_alive(pid)]


def _cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def stray_worker_processes() -> List[Tuple[int, str]]:
    """Live worker processes of this test process: children of its forkserver (forkserver
    workers) and its own ``multiprocessing.spawn`` children (spawn workers). Other children
    (the forkserver and resource tracker themselves, a session-wide Ray) are not workers."""
    found = []
    for pid in _children_of(os.getpid()):
        cmdline = _cmdline(pid)
        if "multiprocessing.forkserver" in cmdline:
            found.extend(_children_of(pid))
        elif "multiprocessing.spawn" in cmdline:
            found.append(pid)
    return [(pid, _cmdline(pid)[:120]) for pid in found]


def assert_no_processes_left(pid_dir: Optional[Path], expected: int) -> None:
    """Every pid a worker recorded is gone, and this process has no worker descendants left."""
    pids = [] if pid_dir is None else [int(p.read_text()) for p in pid_dir.glob("*.pid")]
    assert len(pids) >= expected, f"only {len(pids)} workers recorded their pid"
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and (any(map(pid_alive, pids)) or stray_worker_processes()):
        time.sleep(0.05)
    assert not [pid for pid in pids if pid_alive(pid)], "worker processes left behind"
    assert not stray_worker_processes()
    assert multiprocessing.active_children() == []


def consolidate(updates) -> Dict[Tuple[Any, Any], int]:
    acc: Counter = Counter()
    for d, t, r in updates:
        acc[(d, t)] += r
    return {k: v for k, v in acc.items() if v}


def merged(results: List[Dict[str, Any]]) -> Dict[Tuple[Any, Any], int]:
    return consolidate(u for res in results for u in res["updates"])


def content_at(consolidated: Dict[Tuple[Any, Any], int], t: int) -> Dict[Any, int]:
    acc: Counter = Counter()
    for (d, t1), r in consolidated.items():
        if t1 <= t:
            acc[d] += r
    return {d: r for d, r in acc.items() if r}


def add_contents(parts: List[Dict[Any, int]]) -> Dict[Any, int]:
    acc: Counter = Counter()
    for part in parts:
        for d, r in part.items():
            acc[d] += r
    return {d: r for d, r in acc.items() if r}


def check_frontier_history(history: List[List[int]], rounds: Optional[int]) -> None:
    """Frontiers only advance, end empty, and (interactive runs) pass each round's time."""
    assert history[-1] == [], f"final frontier {history[-1]}"
    for before, after in zip(history, history[1:]):
        assert not after or (before and min(after) >= min(before)), (before, after)
    if rounds is not None:
        # history[0] is the frontier before the first round; history[r + 1] after round r.
        for r in range(rounds):
            f = history[r + 1]
            assert not f or min(f) >= r + 1, f"after round {r} the frontier is {f}"


# ------------------------------------------------------------------------------------------
# the book's skip-level program, parallel as in "Increase the parallelism"


def skip_level_build(
    size: int = SIZE,
    interactive: bool = False,
    hook: Optional[Hook] = None,
    pid_dir: Optional[Path] = None,
):
    """A build running the skip-level program; each worker loads and changes the people
    ``person % peers == index``. ``interactive``: every worker advances to every time and waits
    for the probe after each (the book's "Increase the interaction"); then the result carries the
    probe's frontier after every round and the worker's output content at each round's time,
    read as soon as the probe passed it. ``hook(worker, round, state)`` runs after every round."""

    def build(worker):
        write_pid(pid_dir, worker.index)

        def dataflow(scope):
            session, manages = scope.new_collection(name="manages")
            out = manages.map(lambda mp: (mp[1], mp[0])).join(manages)
            return session, out.capture(), out.probe()

        session, captured, probe = worker.dataflow(dataflow)
        index, peers = worker.index, worker.peers
        state: Dict[str, Any] = {
            "history": [probe.frontier],
            "snapshots": {},
            "index": index,
            "pid": os.getpid(),
        }

        def end_of_round(r: int) -> None:
            if interactive:
                session.advance_to(r + 1)
                session.flush()
                worker.step_until(probe, session.time, timeout=60)
                state["history"].append(probe.frontier)
                state["snapshots"][r] = captured.at(r)
            if hook is not None:
                hook(worker, r, state)

        for person in range(index, size, peers):
            session.insert((person // 2, person))
        end_of_round(0)
        for person in range(1, size):
            mine = person % peers == index
            if not (mine or interactive):
                continue
            session.advance_to(person)
            if mine:
                session.remove((person // 2, person))
                session.insert((person // 3, person))
            end_of_round(person)
        session.close()
        worker.step_until_done(timeout=60)
        state["history"].append(probe.frontier)
        state["updates"] = captured.updates()
        state["probe"] = probe  # travels back too: its frontier must read [] in the launcher
        return state

    return build


@functools.lru_cache(maxsize=None)
def skip_level_reference(size: int = SIZE) -> Dict[Tuple[Any, Any], int]:
    (res,) = tp.execute(skip_level_build(size), workers=1)
    return merged([res])


def skip_level_from_scratch(size: int, t: int) -> Dict[Any, int]:
    """The program evaluated directly on the org chart at time ``t``."""
    manages = {(p // 3 if 1 <= p <= t else p // 2, p) for p in range(size)}
    by_manager: Dict[int, List[int]] = {}
    for m, p in manages:
        by_manager.setdefault(m, []).append(p)
    return {(m1, (m2, p)): 1 for m2, m1 in manages for p in by_manager.get(m1, [])}


def test_reference_is_the_book_listing():
    ref = skip_level_reference(10)
    assert ((0, (0, 0)), 0) in ref and ref[((1, (0, 2)), 2)] == -1
    assert ref[((4, (2, 9)), 4)] == -1
    for t in range(10):
        assert content_at(ref, t) == skip_level_from_scratch(10, t)
    for t in range(SIZE):
        assert content_at(skip_level_reference(), t) == skip_level_from_scratch(SIZE, t)


@pytest.mark.parametrize("workers", [2, 3])
@pytest.mark.parametrize(
    "backend", ["inline", pytest.param("processes", marks=pytest.mark.processes)]
)
@pytest.mark.timeout(60)
def test_parallel_skip_level_equals_one_worker(backend, workers):
    results = tp.execute(skip_level_build(), workers=workers, backend=backend, timeout=60)
    assert [res["index"] for res in results] == list(range(workers))
    assert merged(results) == skip_level_reference()
    for res in results:
        check_frontier_history(res["history"], rounds=None)
        assert res["probe"].frontier == [] and res["probe"].done()
    # Every worker did a share of the join (keys are ints: worker m1 % peers).
    for res in results:
        assert res["updates"], f"worker {res['index']} produced nothing"
        assert all(m1 % workers == res["index"] for (m1, _), _t, _r in res["updates"])


@pytest.mark.parametrize(
    "backend, workers",
    [
        ("inline", 3),
        pytest.param("processes", 2, marks=pytest.mark.processes),
        pytest.param("processes", 3, marks=pytest.mark.processes),
    ],
)
@pytest.mark.timeout(60)
def test_interactive_frontiers_agree_and_outputs_are_final_when_passed(backend, workers):
    """Each worker's probe advances past every round and ends at []; what the workers had
    captured at time t the moment their probe passed t adds up to the one-worker content."""
    results = tp.execute(
        skip_level_build(interactive=True), workers=workers, backend=backend, timeout=60
    )
    reference = skip_level_reference()
    assert merged(results) == reference
    for res in results:
        check_frontier_history(res["history"], rounds=SIZE)
    for t in range(SIZE):
        at_t = add_contents([res["snapshots"][t] for res in results])
        assert at_t == content_at(reference, t) == skip_level_from_scratch(SIZE, t), f"time {t}"


# ------------------------------------------------------------------------------------------
# iterate: transitive closure


def closure(manages: Any) -> Any:
    return manages.iterate(
        lambda transitive: (
            transitive.map(lambda mp: (mp[1], mp[0]))
            .join(transitive)
            .map(lambda kv: (kv[1][0], kv[1][1]))
            .concat(transitive)
            .distinct()
        )
    )


def closure_changes(
    size: int, rounds: int, seed: int = 5
) -> List[Tuple[int, Tuple[int, int], int]]:
    rng = random.Random(seed)
    edges = {(p // 2, p) for p in range(1, size)}
    changes = [(0, e, +1) for e in sorted(edges)]
    for r in range(1, rounds + 1):
        gone = rng.choice(sorted(edges))
        edges.discard(gone)
        changes.append((r, gone, -1))
        while True:
            new = (rng.randrange(size), rng.randrange(size))
            if new not in edges:
                break
        edges.add(new)
        changes.append((r, new, +1))
    return changes


def closure_from_scratch(changes, t: int) -> FrozenSet[Tuple[int, int]]:
    acc: Counter = Counter()
    for t1, e, d in changes:
        if t1 <= t:
            acc[e] += d
    succ: Dict[int, List[int]] = {}
    for (a, b), c in acc.items():
        if c > 0:
            succ.setdefault(a, []).append(b)
    out: Set[Tuple[int, int]] = set()
    for src in succ:
        seen: Set[int] = set()
        todo = list(succ[src])
        while todo:
            n = todo.pop()
            if n not in seen:
                seen.add(n)
                todo.extend(succ.get(n, ()))
        out.update((src, n) for n in seen)
    return frozenset(out)


def closure_build(changes, rounds: int):
    def build(worker):
        def dataflow(scope):
            session, manages = scope.new_collection(name="manages")
            out = closure(manages)
            return session, out.capture(), out.probe()

        session, captured, probe = worker.dataflow(dataflow)
        snapshots, history = {}, [probe.frontier]
        for r in range(rounds + 1):
            session.advance_to(r)
            for k, (t, edge, diff) in enumerate(changes):
                if t == r and k % worker.peers == worker.index:
                    session.update(edge, diff)
            session.advance_to(r + 1)
            session.flush()
            worker.step_until(probe, session.time, timeout=60)
            snapshots[r] = captured.at(r)
            history.append(probe.frontier)
        session.close()
        worker.step_until_done(timeout=60)
        history.append(probe.frontier)
        return {"updates": captured.updates(), "snapshots": snapshots, "history": history}

    return build


@pytest.mark.processes
@pytest.mark.timeout(90)
def test_iterate_on_three_processes_equals_one_worker():
    size, rounds = 16, 6
    changes = closure_changes(size, rounds)
    build = closure_build(changes, rounds)
    (single,) = tp.execute(build, workers=1)
    results = tp.execute(build, workers=3, backend="processes", timeout=90)
    assert merged(results) == merged([single])
    for r in range(rounds + 1):
        expected = {e: 1 for e in closure_from_scratch(changes, r)}
        assert single["snapshots"][r] == expected, f"one worker, round {r}"
        assert add_contents([res["snapshots"][r] for res in results]) == expected, f"round {r}"
    for res in results + [single]:
        check_frontier_history(res["history"], rounds=rounds + 1)


# ------------------------------------------------------------------------------------------
# errors


def explode_on_worker_one(worker):
    if worker.index == 1:
        raise ValueError("build exploded on purpose")


def raising_build(worker):
    def dataflow(scope):
        session, c = scope.new_collection()
        return session, c.count().probe()

    session, probe = worker.dataflow(dataflow)
    session.insert(worker.index)
    session.advance_to(1)
    session.flush()
    worker.step_until(probe, 1, timeout=30)  # some real work with the peers first
    explode_on_worker_one(worker)
    return worker.index


BACKEND_WORKERS = [
    ("inline", 2),
    pytest.param("processes", 2, marks=pytest.mark.processes),
    pytest.param("processes", 3, marks=pytest.mark.processes),
]


@pytest.mark.parametrize("backend, workers", BACKEND_WORKERS)
@pytest.mark.timeout(60)
def test_build_error_names_the_worker_with_traceback(backend, workers):
    start = time.monotonic()
    with pytest.raises(WorkerError) as info:
        tp.execute(raising_build, workers=workers, backend=backend, timeout=60)
    elapsed = time.monotonic() - start
    error = info.value
    assert not isinstance(error, WorkerDiedError)  # the root cause, not a peer's reaction
    assert error.worker == 1
    message = str(error)
    assert "worker 1" in message
    assert "ValueError" in message and "build exploded on purpose" in message
    assert "explode_on_worker_one" in message  # the traceback is in the message...
    assert "explode_on_worker_one" in error.traceback_text  # ...and on the error
    assert "ValueError: build exploded on purpose" in error.traceback_text
    assert elapsed < 15


class UnprintableError(Exception):
    """An exception whose ``str()`` itself raises (a buggy ``__str__``)."""

    def __str__(self):
        raise RuntimeError("__str__ of UnprintableError failed")


def unprintable_build(worker):
    if worker.index == 1:
        raise UnprintableError("original arguments")
    return worker.index


@pytest.mark.parametrize(
    "backend", ["inline", pytest.param("processes", marks=pytest.mark.processes)]
)
@pytest.mark.timeout(60)
def test_unprintable_exception_is_still_a_worker_error(backend):
    with pytest.raises(WorkerError) as info:
        tp.execute(unprintable_build, workers=2, backend=backend, timeout=30)
    assert not isinstance(info.value, WorkerDiedError)
    assert info.value.worker == 1
    assert "UnprintableError" in str(info.value)


def poison_map(x):
    if x == 13:
        raise ZeroDivisionError("record 13 is poisoned")
    return x


def map_error_build(worker):
    def dataflow(scope):
        session, c = scope.new_collection(name="numbers")
        return session, c.map(poison_map).distinct().probe()

    session, _probe = worker.dataflow(dataflow)
    for k in range(20):
        if k % worker.peers == worker.index:
            session.insert(k)  # 13 only on worker 13 % peers; map runs where the record is
    return None


@pytest.mark.parametrize("backend, workers", BACKEND_WORKERS)
@pytest.mark.timeout(60)
def test_operator_error_names_operator_and_worker(backend, workers):
    start = time.monotonic()
    with pytest.raises(WorkerError) as info:
        tp.execute(map_error_build, workers=workers, backend=backend, timeout=60)
    error = info.value
    assert error.worker == 13 % workers
    message = str(error)
    assert f"worker {13 % workers}" in message
    assert "operator 'Linear[map]'" in message  # the fused map the user wrote
    assert "ZeroDivisionError" in message and "record 13 is poisoned" in message
    assert "poison_map" in error.traceback_text
    assert time.monotonic() - start < 15


def poisoned_key(peers: int) -> str:
    """A string key that stable_hash routes to worker ``peers - 1`` (never 0)."""
    return next(
        k for k in (f"poison-{i}" for i in range(1000)) if tp.stable_hash(k) % peers == peers - 1
    )


def reduce_error_build(worker):
    bad = poisoned_key(worker.peers)

    def logic(key, values):
        if key == bad:
            raise KeyError(f"cannot reduce {key}")
        return [(sum(v * r for v, r in values), 1)]

    def dataflow(scope):
        session, c = scope.new_collection(name="pairs")
        return session, c.reduce(logic).probe()

    session, _probe = worker.dataflow(dataflow)
    if worker.index == 0:  # everything enters on worker 0; exchange moves it
        for k in range(10):
            session.insert((f"key-{k}", k))
        session.insert((bad, 1))
    return None


@pytest.mark.parametrize("backend, workers", BACKEND_WORKERS)
@pytest.mark.timeout(60)
def test_reduce_error_is_raised_on_the_worker_the_key_hashes_to(backend, workers):
    with pytest.raises(WorkerError) as info:
        tp.execute(reduce_error_build, workers=workers, backend=backend, timeout=60)
    error = info.value
    assert error.worker == workers - 1
    assert f"worker {workers - 1}" in str(error)
    assert "operator 'Reduce'" in str(error) and "KeyError" in str(error)
    assert poisoned_key(workers) in str(error)


# ------------------------------------------------------------------------------------------
# death and hangs


@pytest.mark.processes
@pytest.mark.timeout(60)
def test_killed_worker_is_reported_and_nothing_is_left(tmp_path):
    def hook(worker, r, state):
        if worker.index == 1 and r == 5:
            os.kill(os.getpid(), signal.SIGKILL)

    build = skip_level_build(interactive=True, hook=hook, pid_dir=tmp_path)
    start = time.monotonic()
    with pytest.raises(WorkerDiedError) as info:
        tp.execute(build, workers=3, backend="processes", timeout=60)
    elapsed = time.monotonic() - start
    assert info.value.worker == 1
    assert "worker 1" in str(info.value) and "SIGKILL" in str(info.value)
    assert elapsed < 10
    assert_no_processes_left(tmp_path, expected=3)


def sleeping_build(pid_dir):
    def build(worker):
        write_pid(pid_dir, worker.index)
        if worker.index == 1:
            time.sleep(1000)
        return worker.index

    return build


@pytest.mark.processes
@pytest.mark.timeout(60)
def test_worker_blocked_in_user_code_times_out_and_is_killed(tmp_path):
    start = time.monotonic()
    with pytest.raises(WaitTimeoutError) as info:
        tp.execute(sleeping_build(tmp_path), workers=2, backend="processes", timeout=5)
    elapsed = time.monotonic() - start
    assert "workers [1]" in str(info.value)
    assert 4.5 < elapsed < 15
    assert_no_processes_left(tmp_path, expected=2)


@pytest.mark.timeout(60)
def test_inline_worker_blocked_in_user_code_times_out():
    def build(worker):
        if worker.index == 1:
            time.sleep(2)
        return worker.index

    start = time.monotonic()
    with pytest.raises(WaitTimeoutError):
        tp.execute(build, workers=2, timeout=0.5)
    assert time.monotonic() - start < 8


# ------------------------------------------------------------------------------------------
# stray connections to a worker's mesh port


def _other_local_address() -> Optional[str]:
    """A non-loopback IPv4 address of this machine, if it has one."""
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.connect(("10.255.255.255", 1))  # no packet is sent
            address = s.getsockname()[0]
    except OSError:
        return None
    return None if address.startswith("127.") else address


def stray_hook(worker, r, state):
    mesh = worker.fabric.mesh
    if r == 0:
        state["address"] = mesh.address
        state["addresses"] = list(mesh.addresses)
    if worker.index == 0 and r == 0:
        # Worker 1's probe passed time 1, so worker 1 has installed its log handler.
        target = mesh.addresses[1]
        # (b) says nothing and stays open until this worker's build has finished (so past the
        # moment worker 1 has seen all three refusals): see stray_build.
        state["_keep_open"] = socket.create_connection(target, timeout=5)
        with socket.create_connection(target, timeout=5) as s:  # (a) garbage
            greeting = b""
            while len(greeting) < 40:  # the acceptor's challenge: magic + nonce
                chunk = s.recv(40 - len(greeting))
                if not chunk:
                    break
                greeting += chunk
            state["greeting"] = greeting[:8]
            s.sendall(b"GET / HTTP/1.0\r\n\r\n" + bytes(range(256)))
            try:
                state["after_garbage"] = s.recv(4096)  # closed on us: b"" (or a reset)
            except ConnectionResetError:
                state["after_garbage"] = b""
        socket.create_connection(target, timeout=5).close()  # (c) connects and leaves
        other = _other_local_address()
        state["other_address"] = other
        if other is not None:
            try:
                socket.create_connection((other, target[1]), timeout=2).close()
                state["reachable_from_other"] = True
            except OSError:
                state["reachable_from_other"] = False
    if worker.index == 1 and r == SIZE - 1:
        # Wait (bounded) for the refusals; the silent one takes the 5 s handshake timeout.
        deadline = time.monotonic() + 15
        while mesh.refused < 3 and time.monotonic() < deadline:
            time.sleep(0.05)
        state["refused"] = mesh.refused


def stray_build():
    inner = skip_level_build(interactive=True, hook=stray_hook)

    def build(worker):
        captured: List[str] = []
        handler = logging.Handler(logging.WARNING)
        handler.emit = lambda record: captured.append(record.getMessage())
        logging.getLogger("timelypy.communication").addHandler(handler)
        try:
            state = inner(worker)
        finally:
            logging.getLogger("timelypy.communication").removeHandler(handler)
        silent = state.pop("_keep_open", None)
        if silent is not None:
            silent.close()
        state["warnings"] = captured
        return state

    return build


@pytest.mark.processes
@pytest.mark.timeout(60)
def test_stray_connections_are_refused_and_the_job_goes_on():
    results = tp.execute(stray_build(), workers=2, backend="processes", timeout=60)
    # The job's output is untouched.
    assert merged(results) == skip_level_reference()
    for res in results:
        check_frontier_history(res["history"], rounds=SIZE)
    w0, w1 = results
    # Loopback only.
    assert w0["address"][0] == w1["address"][0] == "127.0.0.1"
    assert [host for host, _port in w0["addresses"]] == ["127.0.0.1"] * 2
    assert w0["addresses"][1] == w1["address"]
    if w0["other_address"] is not None:
        assert w0["reachable_from_other"] is False
    # Worker 1 greeted the stray with its challenge, then refused all three connections.
    assert w0["greeting"] == b"TPYMESH1"
    assert w0["after_garbage"] == b""
    assert w1["refused"] == 3
    refusals = [m for m in w1["warnings"] if "refused connection" in m]
    assert len(refusals) == 3, w1["warnings"]
    assert all(m.startswith("worker 1: refused connection from 127.0.0.1:") for m in refusals)
    assert any("failed authentication" in m for m in refusals)  # garbage
    assert any("no handshake within" in m for m in refusals)  # silence
    assert any("connection ended during the handshake" in m for m in refusals)  # hang-up
    assert not [m for m in w0["warnings"] if "refused" in m]


# ------------------------------------------------------------------------------------------
# the launching process goes away


LAUNCHER_SCRIPT = """
import os, sys, time
import cloudpickle
import timelypy as tp

cloudpickle.register_pickle_by_value(sys.modules[__name__])


def make_build(pid_dir):
    def build(worker):
        tmp = os.path.join(pid_dir, f"{worker.index}.tmp")
        with open(tmp, "w") as f:
            f.write(str(os.getpid()))
        os.replace(tmp, os.path.join(pid_dir, f"{worker.index}.pid"))
        time.sleep(1000)
    return build


if __name__ == "__main__":
    import signal
    # A shell runs background jobs with SIGINT ignored, and Python then installs no
    # KeyboardInterrupt handler: restore it so Ctrl-C behaves as in a terminal.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    tp.execute(make_build(sys.argv[1]), workers=2, backend="processes")
"""


def _descendants(pid: int) -> List[int]:
    out, todo = [], [pid]
    while todo:
        for child in _children_of(todo.pop()):
            out.append(child)
            todo.append(child)
    return out


@pytest.mark.processes
@pytest.mark.timeout(60)
@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGINT], ids=["SIGKILL", "SIGINT"])
def test_workers_do_not_outlive_the_launcher(tmp_path, sig):
    import subprocess

    script = tmp_path / "launch.py"
    script.write_text(LAUNCHER_SCRIPT)
    pid_dir = tmp_path / "pids"
    pid_dir.mkdir()
    launcher = subprocess.Popen(
        [sys.executable, str(script), str(pid_dir)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 30
        while len(list(pid_dir.glob("*.pid"))) < 2:
            assert launcher.poll() is None, launcher.stderr.read().decode()
            assert time.monotonic() < deadline, "workers did not start"
            time.sleep(0.05)
        workers = [int(p.read_text()) for p in pid_dir.glob("*.pid")]
        helpers = _descendants(launcher.pid)  # forkserver, resource tracker, workers
        assert set(workers) <= set(helpers)
        os.kill(launcher.pid, sig)
        launcher.wait(15)
        deadline = time.monotonic() + 10
        while any(map(pid_alive, helpers)) and time.monotonic() < deadline:
            time.sleep(0.05)
        left = [(pid, _cmdline(pid)[:100]) for pid in helpers if pid_alive(pid)]
        assert not left, f"processes outlived the launcher: {left}"
    finally:
        if launcher.poll() is None:
            launcher.kill()
            launcher.wait(5)
        launcher.stderr.close()
    if sig == signal.SIGINT:
        assert launcher.returncode != 0


# ------------------------------------------------------------------------------------------
# data that crosses process boundaries


SURROGATE_WORDS = ["plain", "caf\u00e9", "\udcffsurrogateescape", "x\ud800y"]


def surrogate_build(worker):
    def dataflow(scope):
        session, words = scope.new_collection(name="words")
        counts = words.count()
        return session, counts.capture()

    session, captured = worker.dataflow(dataflow)
    for word in SURROGATE_WORDS:
        # Insert every word on a worker that does *not* own it, so it must be exchanged.
        if (tp.stable_hash(word) + 1) % worker.peers == worker.index:
            session.insert(word)
    session.close()
    worker.step_until_done(timeout=30)
    return {"updates": captured.updates()}


def test_surrogate_strings_are_exchanged_between_inline_workers():
    expected = {((w, 1), 0): 1 for w in SURROGATE_WORDS}
    assert merged(tp.execute(surrogate_build, workers=1)) == expected
    assert merged(tp.execute(surrogate_build, workers=2)) == expected


@pytest.mark.processes
@pytest.mark.timeout(60)
def test_surrogate_strings_are_exchanged_between_processes():
    expected = {((w, 1), 0): 1 for w in SURROGATE_WORDS}
    assert (
        merged(tp.execute(surrogate_build, workers=2, backend="processes", timeout=60)) == expected
    )
