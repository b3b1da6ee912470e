"""The ray backend: one Ray actor per worker; Ray places and supervises, TCP carries the data.

``timelypy.execute(build, workers=N, backend="ray")`` calls :func:`run_ray`. The split of work,
decided by measurement (``docs/ray.md``):

* **Ray is the control plane.** One actor per worker, placed by a placement group (``SPREAD``,
  explicit fractional ``num_cpus``), started, watched and killed through Ray. The user's
  ``build`` travels once (cloudpickled bytes in Ray's object store) and each worker's result
  comes back as bytes.
* **A direct TCP mesh is the data plane.** Every actor binds a
  :class:`~timelypy.communication.mesh.SocketMesh` listener (``127.0.0.1`` on a one-node cluster,
  the node's IP otherwise) and returns its address through Ray; the driver hands all addresses
  and a fresh per-job secret to every actor, and the actors connect to each other directly (HMAC
  challenge on the secret, as in the ``processes`` backend). A Ray call between actors costs
  ~1 ms per round trip, the mesh ~60 us: a worker step never waits for Ray.

Lifecycle:

1. Ray: if this process is already connected (``ray.is_initialized()``), that Ray is used as is
   and never shut down here. Otherwise ``address`` (``"auto"``, ``"host:port"``, ...) or the
   ``RAY_ADDRESS`` environment variable connects to a running cluster; with neither, a local Ray
   is started (``num_cpus=max(2, workers)``, no dashboard, worker output not forwarded, on
   127.0.0.1 only) with
   Ray's own defaults otherwise: token authentication on, as Ray 2.60 starts every new local
   cluster. This module sets no environment variable. A Ray that this module started or
   connected stays up for every later call in this process (starting one costs seconds);
   :func:`shutdown` ends it, and so does the end of the process. ``ray.init`` runs in the main
   thread or in a daemon thread that lives as long as the process: Ray starts a local
   cluster's ``gcs_server`` and ``raylet`` with ``PR_SET_PDEATHSIG``, which fires when the
   *thread* that started them ends (a session's job thread ends with the session). Beside a
   local Ray it starts, a watchdog process (:mod:`.ray_watchdog`) stops what Ray leaves when the
   driver dies (the raylet's agents and workers) and what :func:`shutdown` leaves.
2. Placement group of ``workers`` bundles ``{"CPU": num_cpus_per_worker}`` (``SPREAD``), or, with
   ``num_cpus_per_worker=0``, no group and the ``SPREAD`` scheduling strategy.
3. Actors start, listen, report ``(host, port)``; the driver sends everyone the addresses and
   the build; each actor forms the mesh and runs the same worker body as the processes backend
   (:func:`~timelypy.workers.launch.supervise.run_worker_main`).
4. The driver waits with bounded ``ray.wait`` calls; a shared
   :class:`~timelypy.workers.launch.supervise.Supervisor` decides what to raise. A worker that
   raises ->
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
from typing import Any, Callable, Dict, List, Optional, Tuple

from ...communication.credit import DEFAULT_WINDOW
from ...communication.mesh import MeshSettings
from ...errors import WaitTimeoutError
from ..worker import Build
from . import ray_start
from .defaults import apply_engine_settings, engine_settings
from .ray_start import ensure_ray, shutdown
from .ray_start import import_ray as _ray
from .supervise import (
    ERROR,
    HEARTBEAT_TIMEOUT,
    POLL,
    BuildOnMesh,
    ErrorReport,
    Outcome,
    Supervisor,
    heartbeat_interval,
    pickle_for_workers,
    run_worker_main,
)

__all__ = [
    "run_ray",
    "run_on_ray_actors",
    "ensure_ray",
    "shutdown",
    "ACTOR_CLASS_NAME",
    "TimelypyWorker",
]

log = logging.getLogger(__name__)

ACTOR_CLASS_NAME = "TimelypyWorker"
"""The class name of the worker actors (as shown by ``ray list actors`` / the dashboard)."""

_KILL_CONFIRM = 5.0
"""Seconds :func:`run_ray` waits (at most) for Ray to confirm that its killed actors are dead."""

_actor_class: Any = None
_actor_class_generation = -1  # the Ray (ray_start.generation) the class was made for


# ------------------------------------------------------------------------------------------
# the actor (one per worker)


class TimelypyWorker:
    """One worker of one job, hosted in a Ray actor (wrapped with ``ray.remote`` lazily)."""

    def __init__(
        self,
        index: int,
        peers: int,
        secret: bytes,
        use_node_ip: bool,
        sys_path: List[str],
        environment: Optional[Dict[str, Optional[str]]] = None,
    ) -> None:
        from ...communication.mesh import SocketMesh

        apply_engine_settings(environment or {})
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
            host = _ray().util.get_node_ip_address()
        self.listener, self.address = SocketMesh.listen(secret, host=host)

    def hello(self) -> Dict[str, Any]:
        """This worker's mesh address, pid and node (for the driver and its error messages)."""
        return {
            "address": self.address,
            "pid": os.getpid(),
            "node": _ray().util.get_node_ip_address(),
        }

    def ping(self) -> bool:
        """Answers while the actor lives (the driver uses it to confirm a kill)."""
        return True

    def run(
        self, payload: bytes, addresses: List[Tuple[str, int]], settings: MeshSettings
    ) -> Outcome:
        """Form the mesh and run the cloudpickled worker main ``payload``; return the outcome."""
        outcomes: List[Outcome] = []
        run_worker_main(
            self.index,
            self.peers,
            self.listener,
            addresses,
            self.secret,
            settings,
            payload,
            outcomes.append,
        )
        return outcomes[0]


def _remote_class() -> Any:
    global _actor_class, _actor_class_generation
    if _actor_class is None or _actor_class_generation != ray_start.generation:
        _actor_class_generation = ray_start.generation
        # Two threads: ``ping`` (the driver's heartbeat) answers while ``run`` runs.
        _actor_class = _ray().remote(max_restarts=0, max_task_retries=0, max_concurrency=2)(
            TimelypyWorker
        )
    return _actor_class


# ------------------------------------------------------------------------------------------
# connecting to Ray


def _ensure_ray(address: Optional[str], workers: int, init_kwargs: Dict[str, Any]) -> Any:
    """Return the ``ray`` module, connected: reuse, connect to ``address``, or start locally
    (with ``num_cpus=max(2, workers)`` unless given); see :func:`.ray_start.ensure_ray`."""
    ray = _ray()
    if ray.is_initialized():
        if init_kwargs or address is not None:
            log.warning(
                "Ray is already initialized in this process; using it and ignoring "
                "address=%r and ray.init options %s",
                address,
                sorted(init_kwargs),
            )
        return ray
    init_kwargs = dict(init_kwargs)
    if address is None and not os.environ.get("RAY_ADDRESS"):
        init_kwargs.setdefault("num_cpus", max(2, workers))
    return ensure_ray(address, **init_kwargs)


def _multi_node(ray: Any) -> bool:
    try:
        return sum(1 for n in ray.nodes() if n.get("Alive")) > 1
    except Exception:  # pragma: no cover - be safe: the node IP works on one node too
        return True


# ------------------------------------------------------------------------------------------
# the driver


class _Actors:
    """The driver's view of one job's actors: handles, hellos, and what their calls returned."""

    def __init__(
        self, ray: Any, workers: int, heartbeat_timeout: Optional[float] = None, cancel: Any = None
    ) -> None:
        self.ray = ray
        self.actors: List[Any] = []
        self.hellos: List[Optional[Dict[str, Any]]] = [None] * workers
        self.supervisor = Supervisor(workers, self.describe, heartbeat_timeout, cancel)
        self.interval = heartbeat_interval(heartbeat_timeout)
        self.pings: Dict[Any, int] = {}  # outstanding ping -> worker
        self.pinged: Dict[int, float] = {}  # worker -> when its last ping was sent

    def heartbeat(self) -> None:
        """Ping every running actor heard from (one ping outstanding each, one per interval);
        kill and report those silent for longer than the heartbeat timeout."""
        if self.interval is None:
            return
        supervisor = self.supervisor
        now = time.monotonic()
        outstanding = set(self.pings.values())
        for i in list(supervisor.last_heard):
            if (
                i not in outstanding
                and not supervisor.answered(i)
                and now - self.pinged.get(i, 0.0) >= self.interval
            ):
                self.pings[self.actors[i].ping.remote()] = i
                self.pinged[i] = now
        for i, silence in supervisor.silent():
            supervisor.died(i, supervisor.hung_message(i, silence), hung=True)
            try:
                self.ray.kill(self.actors[i], no_restart=True)
            except Exception:  # noqa: BLE001 - already gone
                pass

    def describe(self, i: int) -> str:
        """Worker ``i`` for messages, with its pid and node once it said hello."""
        hello = self.hellos[i]
        if hello is None:
            return f"worker {i}"
        return f"worker {i} (Ray actor, pid {hello['pid']} on {hello['node']})"

    def pump(
        self, pending: Dict[Any, int], take: Callable[[int, Any], None], timeout: float
    ) -> None:
        """Wait up to ``timeout`` for any of ``pending``; ``take(index, value)`` what came.

        A call that failed is recorded as the worker's error (the method raised) or death.
        """
        ray = self.ray
        if not pending:
            return
        refs = list(pending) + list(self.pings)
        ready, _ = ray.wait(refs, num_returns=1, timeout=max(timeout, 0.0))
        if ready and len(refs) > 1:  # take in everything else that is already there
            ready, _ = ray.wait(refs, num_returns=len(refs), timeout=0)
        for ref in ready:
            if ref in self.pings:
                j = self.pings.pop(ref)
                try:
                    ray.get(ref)
                    self.supervisor.heard(j)
                except ray.exceptions.RayError:  # dead: its ``run`` call reports it
                    pass
                continue
            i = pending.pop(ref)
            try:
                value = ray.get(ref)
            except ray.exceptions.RayTaskError as exc:  # the actor method itself raised
                text = str(exc)
                self.supervisor.take(i, (ERROR, ErrorReport(type(exc).__name__, text, text)))
            except ray.exceptions.RayError as exc:  # the actor died, its node died, ...
                lines = str(exc).strip().splitlines()
                cause = f"{type(exc).__name__}: {lines[0] if lines else ''}"
                self.supervisor.died(
                    i, f"{self.describe(i)} died before returning a result ({cause})", str(exc)
                )
            else:
                take(i, value)
        self.heartbeat()

    def kill_all(self, confirm: bool) -> None:
        """Kill every actor of the job; with ``confirm``, wait (bounded) until Ray says so."""
        ray = self.ray
        for actor in self.actors:
            try:
                ray.kill(actor, no_restart=True)
            except Exception:  # already gone
                pass
        if confirm and self.actors:
            _confirm_dead(ray, self.actors)


def _confirm_dead(ray: Any, actors: List[Any]) -> None:
    """Wait (at most :data:`_KILL_CONFIRM` s) until a call on every killed actor fails.

    Ray fails a call on an actor only once its control store (GCS) records the actor dead, so
    this confirms the kill with public API only.
    """
    deadline = time.monotonic() + _KILL_CONFIRM
    left = list(actors)
    while left and time.monotonic() < deadline:
        pings = {actor.ping.remote(): actor for actor in left}
        ready, _ = ray.wait(
            list(pings), num_returns=len(pings), timeout=max(deadline - time.monotonic(), 0.0)
        )
        still = []
        for ref in ready:
            try:
                ray.get(ref)
                still.append(pings[ref])  # answered: the kill has not landed yet
            except ray.exceptions.RayError:
                pass
        left = still + [pings[ref] for ref in pings if ref not in ready]
        if left:
            time.sleep(0.02)
    if left:
        log.warning(
            "%d Ray worker actor(s) not confirmed dead within %s s", len(left), _KILL_CONFIRM
        )


def _place(
    ray: Any, workers: int, num_cpus: float, strategy: str, deadline: float, startup_timeout: float
) -> Any:
    """A ready placement group of ``workers`` bundles of ``num_cpus`` CPUs (None for 0 CPUs)."""
    if num_cpus <= 0:
        return None
    from ray.util.placement_group import placement_group

    pg = placement_group([{"CPU": num_cpus}] * workers, strategy=strategy)
    try:
        ready_ref = pg.ready()
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise WaitTimeoutError(
                    f"Ray could not place {workers} workers with {num_cpus} CPU each "
                    f"({strategy}) within {startup_timeout} s; available resources: "
                    f"{ray.available_resources()}"
                )
            done, _ = ray.wait([ready_ref], timeout=min(remaining, POLL))
            if done:
                ray.get(ready_ref)
                return pg
    except BaseException:
        _remove_placement_group(pg)
        raise


def _remove_placement_group(pg: Any) -> None:
    from ray.util.placement_group import remove_placement_group

    try:
        remove_placement_group(pg)
    except Exception:  # pragma: no cover - the cluster went away
        log.warning("could not remove the placement group of a Ray job", exc_info=True)


def _start_actors(job: _Actors, workers: int, pg: Any, num_cpus: float, secret: bytes) -> None:
    """Create one actor per worker (in its bundle of ``pg``, or spread without a group)."""
    from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

    cls = _remote_class()
    use_node_ip = _multi_node(job.ray)
    sys_path = [p for p in sys.path if isinstance(p, str)]
    for i in range(workers):
        strategy: Any = "SPREAD"
        if pg is not None:
            strategy = PlacementGroupSchedulingStrategy(
                placement_group=pg, placement_group_bundle_index=i
            )
        job.actors.append(
            cls.options(num_cpus=num_cpus, scheduling_strategy=strategy).remote(
                i, workers, secret, use_node_ip, sys_path, engine_settings()
            )
        )


def _gather_hellos(job: _Actors, deadline: float, limit: float) -> List[Tuple[str, int]]:
    """Wait for every actor's hello; return their mesh addresses in index order."""
    pending = {actor.hello.remote(): i for i, actor in enumerate(job.actors)}

    def take(i: int, hello: Dict[str, Any]) -> None:
        job.hellos[i] = hello
        job.supervisor.heard(i)

    job.supervisor.wait(
        lambda wait: job.pump(pending, take, wait),
        lambda: not pending,
        deadline,
        lambda: f"Ray workers {sorted(pending.values())} did not start within {limit} s",
    )
    return [tuple(h["address"]) for h in job.hellos]  # type: ignore[index]


def _run_actors(
    job: _Actors,
    payload: bytes,
    addresses: List[Tuple[str, int]],
    settings: MeshSettings,
    deadline: Optional[float],
    timeout: Optional[float],
) -> List[Any]:
    """Run the job on every actor; the results in index order (or the job's failure)."""
    payload_ref = job.ray.put(payload)
    pending = {
        actor.run.remote(payload_ref, addresses, settings): i for i, actor in enumerate(job.actors)
    }
    supervisor = job.supervisor
    supervisor.wait(
        lambda wait: job.pump(pending, supervisor.take, wait),
        supervisor.all_answered,
        deadline,
        lambda: f"workers {sorted(pending.values())} did not finish within {timeout} s",
    )
    return supervisor.results_in_order("driver")


def run_on_ray_actors(
    worker_main: Callable[[int, int, Any], Any],
    workers: int,
    timeout: Optional[float] = None,
    *,
    address: Optional[str] = None,
    num_cpus_per_worker: float = 0.5,
    placement_strategy: str = "SPREAD",
    startup_timeout: float = 120,
    connect_timeout: float = 30.0,
    mesh_window: int = DEFAULT_WINDOW,
    mesh_send_timeout: float = 120.0,
    heartbeat_timeout: Optional[float] = HEARTBEAT_TIMEOUT,
    cancel: Any = None,
    **ray_init_kwargs: Any,
) -> List[Any]:
    """Run ``worker_main(index, workers, mesh)`` on ``workers`` Ray actors joined by a mesh.

    The Ray counterpart of :func:`~timelypy.workers.launch.launcher.run_in_processes`; the
    parameters are those of :func:`run_ray`.
    """
    if workers < 1:
        raise ValueError(f"workers must be >= 1, got {workers}")
    if num_cpus_per_worker < 0:
        raise ValueError(f"num_cpus_per_worker must be >= 0, got {num_cpus_per_worker}")
    payload = pickle_for_workers(worker_main, "build", "the Ray actors")
    ray = _ensure_ray(address, workers, ray_init_kwargs)  # not counted in ``timeout``
    start = time.monotonic()
    deadline = None if timeout is None else start + timeout
    startup_deadline = (
        start + startup_timeout if deadline is None else min(start + startup_timeout, deadline)
    )
    job = _Actors(ray, workers, heartbeat_timeout, cancel)
    pg = None
    try:
        pg = _place(
            ray, workers, num_cpus_per_worker, placement_strategy, startup_deadline, startup_timeout
        )
        log.info("ray: starting %d worker actor(s)", workers)
        _start_actors(job, workers, pg, num_cpus_per_worker, secrets.token_bytes(32))
        addresses = _gather_hellos(
            job, startup_deadline, min(startup_timeout, timeout or startup_timeout)
        )
        started = time.monotonic()
        settings = MeshSettings(connect_timeout, mesh_window, mesh_send_timeout)
        results = _run_actors(job, payload, addresses, settings, deadline, timeout)
        log.debug(
            "ray job of %d workers: %.3f s to start the actors, %.3f s to run",
            workers,
            started - start,
            time.monotonic() - started,
        )
        return results
    finally:
        try:
            job.kill_all(confirm=True)
        finally:
            if pg is not None:
                _remove_placement_group(pg)


def run_ray(
    build: Build, workers: int, timeout: Optional[float] = None, **options: Any
) -> List[Any]:
    """Run ``build(worker)`` on ``workers`` Ray actors; return the results in index order.

    Options:
        address: Ray cluster to connect to (``"auto"``, ``"host:port"``, ``"ray://..."``) when
            this process is not connected yet; ``None``: ``RAY_ADDRESS`` or a new local Ray.
        num_cpus_per_worker: CPUs reserved per actor (fractional is fine; ``0`` reserves none;
            default 0.5).
        placement_strategy: placement group strategy (``"SPREAD"``, the default, ``"PACK"``,
            ``"STRICT_SPREAD"``, ``"STRICT_PACK"``).
        startup_timeout: seconds for the placement group and all actors to come up (120).
        connect_timeout: seconds for the actors' mesh to form (30).
        mesh_window: flow-control bytes in flight per link before a sender waits for the
            receiving actor to consume (8 MiB; 0: off).
        mesh_send_timeout: seconds one send may wait for a receiver that does not consume (120).
        heartbeat_timeout: seconds a running actor may leave the driver's ``ping`` unanswered
            before it is killed as hung (:class:`~timelypy.errors.WorkerHungError`; 30;
            ``None``: no check).
        cancel: a :class:`threading.Event`; once set, the job stops (its actors are killed).
        any other keyword: passed to ``ray.init`` when this call starts or connects Ray.

    ``timeout`` bounds the whole job once Ray is up (``None``: no limit; every internal wait is
    still bounded). Raises :class:`~timelypy.errors.WorkerError` for the first worker that raised
    (with its traceback), :class:`~timelypy.errors.WorkerDiedError` for an actor that died,
    :class:`~timelypy.errors.WaitTimeoutError` when ``timeout`` or ``startup_timeout`` runs out.
    No actor of the job is left alive when this returns or raises.
    """
    return run_on_ray_actors(BuildOnMesh(build, timeout), workers, timeout, **options)
