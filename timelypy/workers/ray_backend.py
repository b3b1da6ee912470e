"""The ray backend: Ray places and supervises the workers; data and progress move over TCP.

``timelypy.execute(build, workers=N, backend="ray")`` calls :func:`run_ray`. The split of work,
decided by measurement (``docs/ray.md``):

* **Ray is the control plane.** One actor per worker, placed by a placement group (``SPREAD``,
  explicit fractional ``num_cpus``), started, watched and killed through Ray. The user's
  ``build`` travels once (``cloudpickle.dumps(build)`` as a bytes object in Ray's object store)
  and each worker's result comes back as bytes.
* **A direct TCP mesh is the data plane.** Every actor binds a :class:`~.mesh.SocketMesh`
  listener (``127.0.0.1`` on a one-node cluster, the node's IP otherwise) and returns its address
  through Ray; the driver hands all addresses and a fresh per-job secret to every actor, and the
  actors connect to each other directly (HMAC challenge on the secret, as in the ``processes``
  backend). A Ray call between actors costs ~1 ms per round trip, the mesh ~60 us: a worker
  step never waits for Ray.

Lifecycle:

1. Ray: if this process is already connected (``ray.is_initialized()``), that Ray is used as is
   and never shut down here. Otherwise ``address`` (``"auto"``, ``"host:port"``, ...) or the
   ``RAY_ADDRESS`` environment variable connects to a running cluster; with neither, a local Ray
   is started (``num_cpus=max(2, workers)``, no dashboard, worker output not forwarded,
   ``RAY_USAGE_STATS_ENABLED=0`` and ``RAY_AUTH_MODE=disabled`` unless already set). A Ray that
   this module started or connected stays up for the next call in this process (starting one
   costs seconds); :func:`shutdown` ends it, and Ray ends it when the process exits.
2. Placement group of ``workers`` bundles ``{"CPU": num_cpus_per_worker}`` (``SPREAD``), or, with
   ``num_cpus_per_worker=0``, no group and the ``SPREAD`` scheduling strategy.
3. Actors start, listen, report ``(host, port)``; the driver sends everyone the addresses, the
   build and the secret; each actor forms the mesh, runs
   :func:`~timelypy.workers.worker.run_worker` and returns its result.
4. The driver waits with bounded ``ray.wait`` calls. A worker that raises ->
   :class:`~timelypy.errors.WorkerError` naming it, with its traceback; an actor that dies
   (killed, crashed, node lost) -> :class:`~timelypy.errors.WorkerDiedError` naming it; its peers'
   meshes notice the closed sockets, and their reports ("worker j died") are used if Ray itself is
   slower to tell. ``timeout`` -> :class:`~timelypy.errors.WaitTimeoutError`.
5. Whatever happens, every actor of the job is killed (``ray.kill``) and the placement group
   removed before :func:`run_ray` returns or raises.

Worker stdout/stderr go to Ray's log files (``log_to_driver=False``); errors come back through
the exceptions above. On a multi-node cluster ``timelypy`` (and whatever ``build`` imports by
reference) must be importable on every node: install it there or ship it with a
``runtime_env`` (``ray job submit --working-dir .``).
"""

from __future__ import annotations

import logging
import os
import secrets
import sys
import time
import traceback
from typing import Any, Callable, Dict, List, Optional, Tuple

import cloudpickle

from timelypy.errors import WaitTimeoutError, WorkerDiedError, WorkerError
from timelypy.workers.launcher import unpickle_results

__all__ = ["run_ray", "shutdown", "ACTOR_CLASS_NAME"]

log = logging.getLogger("timelypy.workers")

ACTOR_CLASS_NAME = "TimelypyWorker"
"""The class name of the worker actors (as shown by ``ray list actors`` / the dashboard)."""

_SECONDARY_GRACE = 1.0
"""Seconds to wait for Ray's own word on a death once a worker reports that a *peer* died."""

_POLL = 0.5
"""Longest single ``ray.wait`` of the driver: every wait is bounded."""

_KILL_CONFIRM = 5.0
"""Seconds :func:`run_ray` waits (at most) for Ray to record its killed actors as dead."""

_started_here = False  # this module called ray.init (and may call ray.shutdown)
_actor_class: Any = None


def _ray() -> Any:
    try:
        import ray
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError(
            "the 'ray' backend needs Ray: pip install 'timelypy[ray]' (ray[default]==2.60.0)"
        ) from exc
    return ray


# ------------------------------------------------------------------------------------------
# the actor (one per worker)


class TimelypyWorker:
    """One worker of one job, hosted in a Ray actor (wrapped with ``ray.remote`` lazily)."""

    def __init__(self, index: int, peers: int, secret: bytes, use_node_ip: bool,
                 sys_path: List[str]) -> None:
        from timelypy.workers.mesh import SocketMesh

        # Functions pickled by reference (a test module, a script's helpers) import as in the
        # driver: add the driver's search path after the actor's own.
        for entry in sys_path:
            if entry not in sys.path:
                sys.path.append(entry)
        self.index = index
        self.peers = peers
        self.secret = secret
        host = "127.0.0.1"
        if use_node_ip:
            import ray

            host = ray.util.get_node_ip_address()
        self.listener, self.address = SocketMesh.listen(secret, host=host)

    def hello(self) -> Dict[str, Any]:
        """This worker's mesh address, pid and node (for the driver and its error messages)."""
        import ray

        return {"address": self.address, "pid": os.getpid(),
                "node": ray.util.get_node_ip_address()}

    def run(self, payload: bytes, addresses: List[Tuple[str, int]], timeout: Optional[float],
            connect_timeout: float) -> Tuple[str, Any]:
        """Form the mesh, run the worker; ``("ok", pickled result)`` or ``("error", report)``."""
        from timelypy.workers.worker import run_worker
        from timelypy.workers.mesh import SocketMesh
        from timelypy.communication.mesh import MeshFabric
        from timelypy.workers.worker import Worker

        mesh = None
        try:
            build = cloudpickle.loads(payload)
            mesh = SocketMesh(self.index, self.peers, self.listener, addresses, self.secret,
                              connect_timeout)
            worker = Worker(self.index, self.peers, MeshFabric(mesh))
            result = run_worker(worker, build, timeout=timeout)
            data = cloudpickle.dumps(result)
        except BaseException as exc:  # noqa: BLE001 - everything is reported to the driver
            report = _error_report(self.index, exc)
            if mesh is not None:
                mesh.abort()  # peers see this worker go; the driver has the root cause
            else:
                self.listener.close()
            return ("error", report)
        mesh.close()
        return ("ok", data)


def _error_report(index: int, exc: BaseException) -> Dict[str, Any]:
    died_peer = getattr(exc, "worker", None) if isinstance(exc, WorkerDiedError) else None
    if died_peer == index:
        died_peer = None
    return {
        "type": type(exc).__qualname__,
        "message": str(exc),
        "traceback": "".join(traceback.format_exception(type(exc), exc, exc.__traceback__)),
        "died_peer": died_peer,
    }


def _remote_class() -> Any:
    global _actor_class
    if _actor_class is None:
        _actor_class = _ray().remote(max_restarts=0, max_task_retries=0)(TimelypyWorker)
    return _actor_class


# ------------------------------------------------------------------------------------------
# connecting to Ray


def _ensure_ray(address: Optional[str], workers: int, init_kwargs: Dict[str, Any]) -> Any:
    """Return the ``ray`` module, connected: reuse, connect to ``address``, or start locally."""
    global _started_here
    ray = _ray()
    if ray.is_initialized():
        if init_kwargs or address is not None:
            log.warning("Ray is already initialized in this process; using it and ignoring "
                        "address=%r and ray.init options %s", address, sorted(init_kwargs))
        return ray
    kwargs: Dict[str, Any] = {"include_dashboard": False, "log_to_driver": False}
    kwargs.update(init_kwargs)
    if address is None and not os.environ.get("RAY_ADDRESS"):
        # No cluster named: start a local Ray (never silently attach to a stray one).
        os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
        os.environ.setdefault("RAY_AUTH_MODE", "disabled")
        kwargs.setdefault("num_cpus", max(2, workers))
        address = "local"
    ray.init(address=address, **kwargs)
    _started_here = True
    return ray


def shutdown() -> None:
    """Shut down (or disconnect from) the Ray that :func:`run_ray` started; a no-op otherwise.

    A Ray the caller initialized is left alone.
    """
    global _started_here
    if not _started_here:
        return
    _started_here = False
    ray = _ray()
    if ray.is_initialized():
        ray.shutdown()


def _multi_node(ray: Any) -> bool:
    try:
        return sum(1 for n in ray.nodes() if n.get("Alive")) > 1
    except Exception:  # pragma: no cover - be safe: the node IP works on one node too
        return True


# ------------------------------------------------------------------------------------------
# the driver


class _Job:
    """The driver's view of one job: actors, their reports, results, errors and deaths."""

    def __init__(self, ray: Any, workers: int) -> None:
        self.ray = ray
        self.workers = workers
        self.actors: List[Any] = []
        self.hellos: List[Optional[Dict[str, Any]]] = [None] * workers
        self.results: Dict[int, bytes] = {}
        self.errors: List[Tuple[int, Dict[str, Any]]] = []  # in arrival order
        self.deaths: List[Tuple[int, str, str]] = []  # (index, short cause, Ray's full text)
        self.secondary_since: Optional[float] = None

    def describe(self, i: int) -> str:
        hello = self.hellos[i]
        if hello is None:
            return f"worker {i}"
        return f"worker {i} (Ray actor, pid {hello['pid']} on {hello['node']})"

    def died(self, i: int, exc: BaseException) -> None:
        first = str(exc).strip().splitlines()
        detail = first[0] if first else ""
        self.deaths.append((i, f"{type(exc).__name__}: {detail}", str(exc)))

    def collect(self, pending: Dict[Any, int], timeout: float) -> List[Tuple[int, Any]]:
        """Wait up to ``timeout`` for any of ``pending``; return the ``(index, value)`` that came.

        Failed references are recorded as deaths or errors and not returned.
        """
        ray = self.ray
        if not pending:
            return []
        refs = list(pending)
        ready, _ = ray.wait(refs, num_returns=1, timeout=max(timeout, 0.0))
        if ready and len(refs) > 1:  # take in everything else that is already there
            ready, _ = ray.wait(refs, num_returns=len(refs), timeout=0)
        out = []
        for ref in ready:
            i = pending.pop(ref)
            try:
                out.append((i, ray.get(ref)))
            except ray.exceptions.RayTaskError as exc:  # the actor method itself raised
                tb = str(exc)
                self.errors.append((i, {"type": type(exc).__name__, "message": tb,
                                        "traceback": tb, "died_peer": None}))
            except ray.exceptions.RayError as exc:  # the actor died, its node died, ...
                self.died(i, exc)
        return out

    def check_failures(self) -> None:
        """Raise for the first failing worker, preferring root causes to "my peer died"."""
        for i, report in self.errors:
            if report["died_peer"] is None:
                tb = report["traceback"]
                raise WorkerError(
                    f"worker {i} failed: {report['type']}: {report['message']}\n"
                    f"--- traceback in worker {i} ---\n{tb.rstrip()}",
                    worker=i,
                    traceback_text=tb,
                )
        if self.deaths:
            i, cause, text = self.deaths[0]
            raise WorkerDiedError(
                f"{self.describe(i)} died before returning a result ({cause})", worker=i,
                traceback_text=text,
            )
        if self.errors and self.secondary_since is not None:
            if time.monotonic() - self.secondary_since >= _SECONDARY_GRACE:
                reporter, report = self.errors[0]
                dead = report["died_peer"]
                raise WorkerDiedError(
                    f"{self.describe(dead)} died (reported by worker {reporter}: "
                    f"{report['message']})",
                    worker=dead,
                    traceback_text=report["traceback"],
                )

    def take(self, i: int, value: Tuple[str, Any]) -> None:
        tag, body = value
        if tag == "ok":
            self.results[i] = body
        else:
            self.errors.append((i, body))
            if body["died_peer"] is not None and self.secondary_since is None:
                self.secondary_since = time.monotonic()

    def kill_all(self, confirm: bool) -> None:
        """Kill every actor of the job; with ``confirm``, wait (bounded) until Ray says so."""
        ray = self.ray
        for actor in self.actors:
            try:
                ray.kill(actor, no_restart=True)
            except Exception:  # already gone
                pass
        if not confirm or not self.actors:
            return
        deadline = time.monotonic() + _KILL_CONFIRM
        left = [a._actor_id.hex() for a in self.actors]
        while left:
            left = [a for a in left if not _actor_dead(a)]
            if not left or time.monotonic() >= deadline:
                break
            time.sleep(0.02)
        if left:
            log.warning("%d Ray worker actor(s) not confirmed dead within %s s", len(left),
                        _KILL_CONFIRM)


def _actor_dead(actor_id: str) -> bool:
    """Whether Ray's control store (GCS) records the actor as dead (True if it cannot tell)."""
    try:
        from ray._private import state

        info = state.actors(actor_id=actor_id)
    except Exception:  # a private API: if it changes, do not wait
        return True
    return not info or info.get("State") == "DEAD"


def run_ray(
    build: Callable[[Any], Any],
    workers: int,
    timeout: Optional[float] = None,
    *,
    address: Optional[str] = None,
    num_cpus_per_worker: float = 0.5,
    placement_strategy: str = "SPREAD",
    startup_timeout: float = 120,
    connect_timeout: float = 30.0,
    **ray_init_kwargs: Any,
) -> List[Any]:
    """Run ``build(worker)`` on ``workers`` Ray actors; return the results in index order.

    Parameters:
        build: the dataflow-building function (cloudpickled; closures work).
        workers: number of workers (one actor each).
        timeout: seconds for the whole job once Ray is up (``None``: no limit; every internal
            wait is still bounded).
        address: Ray cluster to connect to (``"auto"``, ``"host:port"``, ``"ray://..."``) when
            this process is not connected yet; ``None``: ``RAY_ADDRESS`` or a new local Ray.
        num_cpus_per_worker: CPUs reserved per actor (fractional is fine; ``0`` reserves none).
        placement_strategy: placement group strategy (``"SPREAD"``, ``"PACK"``,
            ``"STRICT_SPREAD"``, ``"STRICT_PACK"``).
        startup_timeout: seconds for the placement group and all actors to come up.
        connect_timeout: seconds for the actors' mesh to form.
        ray_init_kwargs: passed to ``ray.init`` when this call starts or connects Ray.

    Raises :class:`~timelypy.errors.WorkerError` for the first worker that raised (with its
    traceback), :class:`~timelypy.errors.WorkerDiedError` for an actor that died,
    :class:`~timelypy.errors.WaitTimeoutError` when ``timeout`` or ``startup_timeout`` runs out.
    No actor of the job is left alive when this returns or raises.
    """
    if workers < 1:
        raise ValueError(f"workers must be >= 1, got {workers}")
    if num_cpus_per_worker < 0:
        raise ValueError(f"num_cpus_per_worker must be >= 0, got {num_cpus_per_worker}")
    try:
        payload = cloudpickle.dumps(build)
    except Exception as exc:
        if hasattr(exc, "add_note"):  # Python >= 3.11
            exc.add_note("timelypy: build must be picklable with cloudpickle to reach the Ray actors")
        raise
    ray = _ensure_ray(address, workers, ray_init_kwargs)  # not counted in ``timeout``
    start = time.monotonic()
    deadline = None if timeout is None else start + timeout
    from ray.util.placement_group import placement_group, remove_placement_group
    from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

    secret = secrets.token_bytes(32)
    use_node_ip = _multi_node(ray)
    job = _Job(ray, workers)
    pg = None
    startup_deadline = time.monotonic() + startup_timeout
    if deadline is not None:
        startup_deadline = min(startup_deadline, deadline)
    try:
        # Phase 0: where the actors go.
        if num_cpus_per_worker > 0:
            pg = placement_group([{"CPU": num_cpus_per_worker}] * workers,
                                 strategy=placement_strategy)
            ready_ref = pg.ready()
            while True:
                remaining = startup_deadline - time.monotonic()
                if remaining <= 0:
                    raise WaitTimeoutError(
                        f"Ray could not place {workers} workers with {num_cpus_per_worker} CPU "
                        f"each ({placement_strategy}) within {startup_timeout} s; available "
                        f"resources: {ray.available_resources()}"
                    )
                done, _ = ray.wait([ready_ref], timeout=min(remaining, _POLL))
                if done:
                    ray.get(ready_ref)
                    break

        # Phase 1: start the actors; each binds its listener and says hello.
        cls = _remote_class()
        sys_path = [p for p in sys.path if isinstance(p, str)]
        for i in range(workers):
            options: Dict[str, Any] = {"num_cpus": num_cpus_per_worker}
            if pg is not None:
                options["scheduling_strategy"] = PlacementGroupSchedulingStrategy(
                    placement_group=pg, placement_group_bundle_index=i)
            else:
                options["scheduling_strategy"] = "SPREAD"
            job.actors.append(cls.options(**options).remote(i, workers, secret, use_node_ip,
                                                            sys_path))
        pending = {actor.hello.remote(): i for i, actor in enumerate(job.actors)}
        while pending:
            for i, hello in job.collect(pending, min(_POLL, max(
                    startup_deadline - time.monotonic(), 0.0))):
                job.hellos[i] = hello
            job.check_failures()
            if pending and time.monotonic() >= startup_deadline:
                missing = sorted(pending.values())
                raise WaitTimeoutError(
                    f"Ray workers {missing} did not start within "
                    f"{min(startup_timeout, timeout or startup_timeout)} s"
                )
        addresses = [tuple(h["address"]) for h in job.hellos]  # type: ignore[index]
        started = time.monotonic()

        # Phase 2: run; results (or errors) come back as the actors finish.
        payload_ref = ray.put(payload)
        pending = {
            actor.run.remote(payload_ref, addresses, timeout, connect_timeout): i
            for i, actor in enumerate(job.actors)
        }
        while pending:
            wait = _POLL
            if deadline is not None:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    missing = sorted(pending.values())
                    raise WaitTimeoutError(f"workers {missing} did not finish within {timeout} s")
                wait = min(wait, remaining)
            if job.secondary_since is not None:
                wait = min(wait, 0.1)
            for i, value in job.collect(pending, wait):
                job.take(i, value)
            job.check_failures()
        if job.errors:
            # Every run has answered: nothing more will come, report the first error now.
            job.secondary_since = float("-inf")
            job.check_failures()
        results = unpickle_results(job.results, workers, "driver")
        log.debug("ray job of %d workers: %.3f s to start the actors, %.3f s to run",
                  workers, started - start, time.monotonic() - started)
        return results
    finally:
        try:
            job.kill_all(confirm=True)
        finally:
            if pg is not None:
                try:
                    remove_placement_group(pg)
                except Exception:  # pragma: no cover - the cluster went away
                    log.warning("could not remove the placement group of a Ray job",
                                exc_info=True)
