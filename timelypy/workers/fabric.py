"""The fabric: how a worker moves data batches and progress batches to its peers.

Every backend gives each worker an object with this interface (a duck type):

* ``send(dest, message)``: deliver ``message`` to worker ``dest`` (FIFO per sender/receiver);
* ``broadcast(message)``: deliver to every worker, this one included;
* ``recv_nowait() -> [(source, message)]``: what has arrived, in order per sender;
* ``flush()``: called at the end of every worker step (push buffered frames; the inline
  fabric passes the turn to the next worker here);
* ``wait(timeout) -> bool``: block until something arrives or ``timeout`` passes.

Messages are tuples: ``("d", channel, time, records)`` for data and ``("p", channel, updates)``
for a subgraph's progress batch. Backends move them as they are (inline), as msgpack frames over
loopback sockets (processes), or as bytes between Ray actors (ray).
"""

from __future__ import annotations

from typing import Any, List, Protocol, Tuple

__all__ = ["Fabric"]


class Fabric(Protocol):
    index: int
    peers: int

    def send(self, dest: int, message: Any) -> None: ...

    def broadcast(self, message: Any) -> None: ...

    def recv_nowait(self) -> List[Tuple[int, Any]]: ...

    def flush(self) -> None: ...

    def wait(self, timeout: float) -> bool: ...
