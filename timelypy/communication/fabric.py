"""The fabric protocol and the message kinds that travel on it (timely's communication layer).

A worker talks to its peers through one object with this interface (timely's ``Allocate`` with
its ``Push`` / ``Pull`` endpoints, reduced to what a Python worker needs):

* ``send(dest, message)``: deliver ``message`` to worker ``dest`` (FIFO per sender/receiver);
* ``broadcast(message)``: deliver to every worker, this one included;
* ``send_to_peers(message)`` (optional): deliver to every other worker (a worker's progress
  goes to its peers this way, its own copy loops back without the transport); without it the
  worker calls ``send`` once per peer;
* ``recv_nowait() -> [(source, message)]``: what has arrived, in order per sender;
* ``flush()``: called at the end of every worker step (push buffered frames; the inline
  fabric passes the turn to the next worker here);
* ``wait(timeout) -> bool``: block until something arrives or ``timeout`` passes.

Every message is a tuple whose first item is its kind, defined here once:

* :data:`DATA` ``("d", channel, time, records)``: records on an exchange channel;
* :data:`PROGRESS` ``("p", channel, updates)``: one subgraph's progress batch,
  ``updates = [((location, time), delta), ...]``;
* :data:`CONTROL` ``("c", payload)``: a driver session's command, for the worker's service loop.

Transports move these tuples as they are (:mod:`.inline`) or as msgpack frames over
authenticated loopback sockets (:mod:`.mesh`, :mod:`.wire`).
"""

from __future__ import annotations

from typing import Any, List, Protocol, Tuple, runtime_checkable

__all__ = [
    "Fabric",
    "DATA",
    "PROGRESS",
    "CONTROL",
    "MESSAGE_KINDS",
    "data_message",
    "progress_message",
    "control_message",
]

DATA = "d"
"""Kind of a data message: ``(DATA, channel, time, records)``."""
PROGRESS = "p"
"""Kind of a progress message: ``(PROGRESS, channel, updates)``."""
CONTROL = "c"
"""Kind of a control message: ``(CONTROL, payload)``."""
MESSAGE_KINDS = (DATA, PROGRESS, CONTROL)
"""Every message kind."""


def data_message(channel: int, time: Any, records: List[Any]) -> Tuple[str, int, Any, List[Any]]:
    """A data message carrying ``records`` at ``time`` on exchange ``channel``."""
    return (DATA, channel, time, records)


def progress_message(channel: int, updates: List[Tuple[Any, int]]) -> Tuple[str, int, List[Any]]:
    """A progress message carrying one subgraph's ``[((location, time), delta), ...]``."""
    return (PROGRESS, channel, updates)


def control_message(payload: Any) -> Tuple[str, Any]:
    """A control message (a driver session's command) for the receiving worker."""
    return (CONTROL, payload)


@runtime_checkable
class Fabric(Protocol):
    """What a worker needs from its transport. See the module docstring for the semantics."""

    index: int
    peers: int

    def send(self, dest: int, message: Any) -> None:
        """Deliver ``message`` to worker ``dest`` (FIFO per sender and receiver)."""
        ...

    def broadcast(self, message: Any) -> None:
        """Deliver ``message`` to every worker, this one included."""
        ...

    def recv_nowait(self) -> List[Tuple[int, Any]]:
        """The ``(source, message)`` pairs that have arrived, in order per sender; never blocks."""
        ...

    def flush(self) -> None:
        """End of a worker step: push buffered frames (the inline fabric passes the turn)."""
        ...

    def wait(self, timeout: float) -> bool:
        """Block until something arrives or ``timeout`` seconds pass; True if something is
        waiting."""
        ...
