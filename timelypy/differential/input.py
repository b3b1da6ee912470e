"""Input sessions: change a collection by inserting and removing records at logical times."""

from __future__ import annotations

import numbers
from typing import TYPE_CHECKING, Any, Iterable, List, Optional, Sequence, Tuple

from ..dataflow.input import InputHandle
from ..dataflow.state import OperatorState
from ..dataflow.worker_interface import AsWorker
from ..errors import (
    DiffTypeError,
    InputClosedError,
    SchemaError,
    TimeOrderError,
    UnhashableDataError,
)
from .collection import Collection
from .column_message import ColumnMessage
from .input_columns import Unfit, arrow_parts, column_updates
from .trace.layout import Layout

if TYPE_CHECKING:
    from ..dataflow.scope import Scope

__all__ = ["InputSession", "new_collection", "new_collection_from"]


class InputSession:
    """Changes to one input collection (differential-dataflow's ``InputSession``).

    ``insert``, ``remove`` and ``update`` change records at the session's current ``time``;
    ``update_at`` at a time at or after it. ``advance_to(t)`` promises no more changes before
    ``t``; it takes effect (the dataflow learns of it) at ``flush()``, so it can be called per
    record cheaply. Changes are buffered until ``flush()`` (or a large buffer, or a worker step).

    Example: ``words_in, words = scope.new_collection()`` in a dataflow; then
    ``words_in.insert("a")``, ``words_in.advance_to(1)``, ``words_in.flush()``.
    """

    BUFFER = 4096

    max_pending: Optional[int] = 200_000
    """Backpressure for an open-loop producer: once this many updates were sent into the
    dataflow without a worker step in between (within a time, as a bulk load sends them, or
    across times), the session asks the worker to take them in (``pace_input`` of
    :class:`~timelypy.dataflow.worker_interface.AsWorker`, the worker's policy: the
    ``Worker`` flushes and steps until it is quiet, only without peers, never from inside a
    step or while a dataflow is being built, nor on a driver session's workers), so the
    dataflow seals, joins and compacts them before more arrive instead of holding every
    change at once. ``None``: never. Read when the session is made."""

    def __init__(
        self,
        handle: InputHandle,
        name: str = "input",
        worker: Optional[AsWorker] = None,
        schema: Optional[Layout] = None,
    ) -> None:
        self._handle = handle
        self.schema = schema
        """The declared layout of the records (None: not declared), checked as they are sent."""
        self._worker = worker
        self._sent = 0  # updates sent into the dataflow since the worker's step `_sent_step`
        self._sent_step = -1
        bound = self.max_pending
        self._bound: float = bound if bound is not None and worker is not None else float("inf")
        self._name = name
        self._time = handle.time
        self._told = self._time  # the time the handle was last advanced to
        self._closed = handle.closed  # the session closes its handle (nothing else holds it)
        self._buffer: List[Tuple[Any, Any, int]] = []
        self._le = handle.order.le
        # For unadvanced(): updates sent into the handle (all times), that count and the buffer's
        # length when the time last moved, and updates since then at a later time (update_at).
        self._total = 0
        self._mark = 0
        self._ahead = 0

    @property
    def time(self) -> Any:
        """The session's current time.

        Example: after ``session.advance_to(3)``, ``session.time`` is ``3``."""
        return self._time

    def _check(self, data: Any) -> None:
        if self._closed:
            raise InputClosedError(f"input session {self._name!r}: used after close()")
        try:
            hash(data)
        except TypeError:
            raise UnhashableDataError(
                f"input session {self._name!r}: records must be hashable (use tuples, "
                f"frozensets or frozen dataclasses, not lists, dicts, sets or mutable "
                f"dataclasses), got {data!r} of type {type(data).__name__}"
            ) from None

    def insert(self, data: Any) -> None:
        """Add one copy of ``data`` at the current time.

        Example: ``session.insert(("ann", "tea"))``."""
        try:
            hash(data)
        except TypeError:
            self._check(data)
        if self._closed:
            self._check(data)
        buf = self._buffer
        buf.append((data, self._time, 1))
        if len(buf) >= self.BUFFER:
            self._send()

    def remove(self, data: Any) -> None:
        """Remove one copy of ``data`` at the current time.

        Example: ``session.remove(("ann", "tea"))`` undoes one ``insert``."""
        try:
            hash(data)
        except TypeError:
            self._check(data)
        if self._closed:
            self._check(data)
        buf = self._buffer
        buf.append((data, self._time, -1))
        if len(buf) >= self.BUFFER:
            self._send()

    def update(self, data: Any, diff: int) -> None:
        """Add ``diff`` copies (negative: remove) of ``data`` at the current time.

        Example: ``session.update("a", 3)`` adds three copies of ``"a"``;
        ``session.update("a", -3)`` removes them."""
        try:
            hash(data)
        except TypeError:
            self._check(data)
        if self._closed:
            self._check(data)
        if type(diff) is not int:
            diff = self._integer_diff(data, diff)
        if diff:
            buf = self._buffer
            buf.append((data, self._time, diff))
            if len(buf) >= self.BUFFER:
                self._send()

    def _integer_diff(self, data: Any, diff: Any) -> int:
        """``diff`` as an ``int`` if it is an integer (numpy integers too), else a clear error:
        a float or a string would make counts that never cancel exactly."""
        if isinstance(diff, numbers.Integral) and not isinstance(diff, bool):
            return int(diff)
        raise DiffTypeError(
            f"input session {self._name!r}: the diff of record {data!r} must be an integer, got "
            f"{diff!r} of type {type(diff).__name__}"
        )

    def update_at(self, data: Any, time: Any, diff: int) -> None:
        """Change ``data`` by ``diff`` at ``time``, which must be at or after the session time.

        Example: ``session.update_at("a", 5, -1)`` while at time 2: one ``"a"`` fewer from time
        5 on."""
        self._check(data)
        if not self._le(self._time, time):
            raise TimeOrderError(
                f"input session {self._name!r}: update_at time {time!r} is before the session "
                f"time {self._time!r} (record {data!r})"
            )
        if type(diff) is not int:
            diff = self._integer_diff(data, diff)
        if diff:
            if time != self._time:
                self._ahead += 1
            self._buffer.append((data, time, diff))
            if len(self._buffer) >= self.BUFFER:
                self._send()

    def send_updates(self, updates: Iterable[Tuple[Any, Any, int]]) -> None:
        """Apply ``(data, time, diff)`` updates, each at a time at or after the session time.

        Example: ``session.send_updates([("a", 5, 1), ("b", 6, -1)])``."""
        for data, time, diff in updates:
            self.update_at(data, time, diff)

    def send_columns(
        self, records: Sequence[Any], times: Sequence[Any], diffs: Sequence[int]
    ) -> None:
        """Apply updates given as columns (``records[i]`` changes by ``diffs[i]`` at
        ``times[i]``) that the caller has checked already: hashable records, non-zero int
        diffs, int times at or after the session time. The bulk road of a driver session's
        flush; use :meth:`send_updates` for anything unchecked.

        Example: ``session.send_columns(["a", "b"], [5, 6], [1, -1])``."""
        if self._closed:
            raise InputClosedError(f"input session {self._name!r}: used after close()")
        # updates at a later time (update_at's) do not count towards unadvanced()
        at_now = (
            times.count(self._time)
            if isinstance(times, list)
            else sum(1 for t in times if t == self._time)
        )
        self._ahead += len(times) - at_now
        self._buffer.extend(zip(records, times, diffs))
        if len(self._buffer) >= self.BUFFER:
            self._send()

    def update_columns(self, keys: Any, values: Any, diffs: Any = None) -> int:
        """Change the records ``(keys[i], values[i])`` by ``diffs[i]`` (None: insert each
        once; one int: the same for all) at the current time, given as columns: the key and
        the value are each a 1-d numpy or Arrow array (a scalar: ints, floats, bools or
        strings, see :mod:`.input_columns`; no nulls) or a list or tuple of them (a tuple,
        nested). The updates travel as one column message: an arrangement of the collection
        keeps them as columns, any other operator receives them as tuples. Checked against the
        schema where one was declared (:class:`~timelypy.errors.SchemaError` names the input
        and the value; nothing is sent then). A NaN or ``-0.0`` (without a schema) sends the
        tuples instead. Returns the number of updates sent (zero diffs are dropped).

        Example: ``session.update_columns(np.array([1, 2]), np.array([10, 20]))`` inserts
        ``(1, 10)`` and ``(2, 20)``; ``diffs=-1`` would remove them."""
        if self._closed:
            raise InputClosedError(f"input session {self._name!r}: used after close()")
        time = self._time
        if type(time) is not int:
            raise TimeOrderError(
                f"input session {self._name!r}: columns are taken at int times only (the "
                f"session is at {time!r}); send the records with update()"
            )
        try:
            message = column_updates(self._name, keys, values, diffs, time, self.schema)
        except Unfit as unfit:
            for data, _, diff in unfit.records:
                self.update(data, diff)
            return len(unfit.records)
        self.send_column_message(message)
        return len(message)

    def send_column_message(self, message: ColumnMessage) -> None:
        """Send a column message checked already (:meth:`check_message`, times at or after
        the session time): the bulk road of a driver session's columns. The updates
        buffered before it go first.

        Example: ``session.send_column_message(message)`` for a message of
        :func:`~.input_columns.column_updates`."""
        if self._closed:
            raise InputClosedError(f"input session {self._name!r}: used after close()")
        n = len(message)
        if n:
            self._send()
            self._handle.send_message(message)
            self._counted(n)
            if message.first_time() != self._time:
                self._ahead += n

    def check_message(self, message: ColumnMessage) -> Optional[str]:
        """Why the session cannot take ``message`` (its layouts do not match the declared
        schema), or None.

        Example: ``None`` for any message when no schema was declared."""
        schema = self.schema
        if schema is None:
            return None
        shape = (message.key_layout.shape, message.val_layout.shape)
        if schema.shape == shape:
            return None
        return (
            f"columns of the layout ({message.key_layout.describe()}, "
            f"{message.val_layout.describe()}) do not match the declared schema "
            f"{schema.describe()}"
        )

    def insert_columns(self, keys: Any, values: Any) -> int:
        """Insert one copy of each record ``(keys[i], values[i])`` at the current time (see
        :meth:`update_columns`); returns the number inserted.

        Example: ``session.insert_columns(np.array([1, 2]), np.array([10, 20]))``."""
        return self.update_columns(keys, values)

    def update_arrow(
        self, table: Any, key: Sequence[str], value: Sequence[str], diff: Optional[str] = None
    ) -> int:
        """:meth:`update_columns` of the named columns of an Arrow table or record batch:
        ``key`` and ``value`` name one column (a scalar) or several (a tuple), ``diff`` the
        column of diffs (None: insert each row once). Returns the number of updates sent.

        Example: ``session.update_arrow(pa.table({"k": [1, 2], "v": [3, 4]}), ["k"], ["v"])``
        inserts ``(1, 3)`` and ``(2, 4)``."""
        keys, values = arrow_parts(table, list(key), list(value))
        diffs = None if diff is None else table.column(diff)
        return self.update_columns(keys, values, diffs)

    def _counted(self, n: int) -> None:
        """Count ``n`` updates sent into the handle (for pacing and ``unadvanced``)."""
        self._total += n
        worker = self._worker
        if worker is not None:
            if worker.steps != self._sent_step:
                self._sent_step = worker.steps
                self._sent = 0
            self._sent += n
            if self._sent >= self._bound:
                self._pace()

    def insert_many(self, records: Iterable[Any]) -> None:
        """Insert every record of ``records`` at the current time.

        Example: ``session.insert_many(range(1000))``."""
        t = self._time
        buf = self._buffer
        closed = self._closed
        if closed:
            raise InputClosedError(f"input session {self._name!r}: used after close()")
        for d in records:
            buf.append((d, t, 1))
        if len(buf) >= self.BUFFER:
            self._send()

    def advance_to(self, time: Any) -> None:
        """Move the session time forward (effective at the next ``flush``).

        Example: ``session.advance_to(1)``, ``session.flush()``,
        ``worker.step_until(probe, 1)``: time 0 complete."""
        if (
            type(time) is int
            and type(self._time) is int
            and time >= self._time
            and not self._closed
        ):
            if time != self._time:
                self._mark = self._total + len(self._buffer)
                self._ahead = 0
                if self._sent >= self._bound:
                    self._time = time
                    self._pace()
                    return
            self._time = time  # the common case, without a call to the order's less-equal
            return
        if self._closed:
            raise InputClosedError(f"input session {self._name!r}: used after close()")
        if not self._le(self._time, time):
            raise TimeOrderError(
                f"input session {self._name!r}: cannot advance to {time!r}, before the current "
                f"time {self._time!r}"
            )
        if time != self._time:
            self._mark = self._total + len(self._buffer)
            self._ahead = 0
        self._time = time
        if self._sent >= self._bound:
            self._pace()

    def _pace(self) -> None:
        """Ask the worker to take in what was sent (see :attr:`max_pending`): whether and how
        is the worker's policy (:meth:`~timelypy.dataflow.worker_interface.AsWorker.pace_input`)."""
        worker = self._worker
        assert worker is not None  # the bound is finite only with a worker
        if worker.steps != self._sent_step:  # it stepped since: taken in already
            self._sent = 0
            return
        if worker.pace_input(self):
            self._sent = 0
            self._sent_step = worker.steps

    def _send(self) -> None:
        if self._buffer:
            data, self._buffer = self._buffer, []
            if self.schema is not None:
                self._check_schema(data)
            self._handle.send_batch(data)
            self._counted(len(data))

    def _check_schema(self, data: List[Tuple[Any, Any, int]]) -> None:
        """SchemaError naming the first record of ``data`` that does not fit the schema (the
        whole batch is refused: nothing of it was sent)."""
        schema = self.schema
        assert schema is not None
        records = [u[0] for u in data]
        if schema.encode(records) is not None:
            return
        index = schema.first_misfit(records)
        record = records[index if index is not None else 0]
        raise SchemaError(
            f"input session {self._name!r}: record {record!r} does not fit the declared schema "
            f"{schema.describe()} (the {len(data)} changes buffered with it were not sent)"
        )

    @property
    def handle(self) -> InputHandle:
        """The timely input handle the session sends through.

        Example: ``session.handle.operator.index`` is the input operator's index."""
        return self._handle

    def snapshot_state(self) -> OperatorState:
        """The session's position: ``shared`` is ``{"time": ..., "closed": ...}``.

        Example: ``session.snapshot_state().shared["time"]`` is ``3`` at time 3."""
        return OperatorState(shared={"time": self._time, "closed": self._closed})

    def restore_state(self, state: OperatorState) -> None:
        """Continue at the snapshot's time: the changes the build made at earlier times (as
        ``new_collection_from`` does) are in the restored state already and are dropped; the
        session and its handle advance to the time.

        Example: ``session.restore_state(OperatorState(shared={"time": 3}))``; then
        ``session.time`` is ``3``."""
        time = (state.shared or {}).get("time", self._time)
        le = self._le
        self._buffer = [u for u in self._buffer if le(time, u[1])]
        self._handle.discard_before(time, record_time=_time_of)
        if not self._closed and time != self._time:
            self.advance_to(time)
            self.flush()

    def flush(self) -> None:
        """Send buffered changes and let the dataflow know the session's time.

        Example: ``session.advance_to(t)``, ``session.flush()``, then
        ``worker.step_until(probe, t)``."""
        handle = self._handle
        if self._buffer:
            self._send()
        if self._time != self._told:
            self._told = self._time
            if not handle.closed:
                handle.advance_to(self._time)  # flushes the handle too
                return
        handle.flush()  # after close: only messages held while the dataflow was being built

    def close(self) -> None:
        """Flush and close: the collection will not change again. Idempotent.

        Example: ``session.close()``, then ``worker.step_until_done()`` runs a batch computation
        to its end."""
        if self._closed:
            return
        self._send()
        self._handle.close()
        self._closed = True

    @property
    def closed(self) -> bool:
        """The session was closed: the collection will not change again.

        Example: ``True`` after ``session.close()``."""
        return self._closed

    def capability(self) -> Optional[Tuple[Any, Any, Any]]:
        """The capability the session's input holds: ``(subgraph, location, time)``, or None
        once closed (see :meth:`~timelypy.dataflow.input.InputHandle.capability`).

        Example: ``(subgraph, location, 3)`` at time 3; ``None`` after ``close()``."""
        return self._handle.capability()

    def has_pending(self) -> bool:
        """Changes are buffered here or in the input handle.

        Example: ``True`` after ``session.insert(x)``; ``False`` again after
        ``session.flush()``."""
        return bool(self._buffer) or self._handle.has_pending()

    def unadvanced(self) -> Optional[Any]:
        """The session's time if updates were made at it since it became the time (sent or
        buffered): they are complete only once the session advances past it. None otherwise,
        and once closed. (A wait for this time would return without them: see
        :class:`~timelypy.errors.PendingTimeWarning`.)

        Example: ``0`` after ``session.insert("a")``; ``None`` after ``session.advance_to(1)``."""
        if self._closed:
            return None
        fresh = self._total + len(self._buffer) - self._mark - self._ahead
        return self._time if fresh > 0 else None

    def describe(self) -> str:
        """The session's name and time (for stall diagnostics).

        Example: ``"'edges' at 3"``, or ``"'edges' at 3 (closed)"``."""
        return f"{self._name!r} at {self._time!r}" + (" (closed)" if self.closed else "")


def _time_of(update: Tuple[Any, Any, int]) -> Any:
    return update[1]


def new_collection(
    scope: Scope, name: str = "Input", schema: Any = None
) -> Tuple[InputSession, Collection]:
    """A new input collection in ``scope``: returns ``(session, collection)``. The session is
    registered with the worker (flushed at every step, closed when ``build`` returns).

    ``schema`` declares the records fixed-width: ``int``, ``float``, ``bool``, ``str``,
    ``bytes`` or a tuple of them, nested (``(int, (int, float))``, ``(str, int)``; a string is
    exactly ``str`` or ``bytes``, never a subclass). Every record is checked as the session sends it
    (:class:`~timelypy.errors.SchemaError` names the first that does not fit), so the
    arrangements built of the collection keep their batches as columns without a miss. Without
    one, arrangements detect the layout from the records themselves.

    Example: ``edges_in, edges = new_collection(scope, "edges", schema=(int, int))``;
    ``scope.new_collection("edges")`` calls it."""
    layout = None if schema is None else Layout.from_types(schema)
    handle, stream = scope.new_input(name, register=False)
    session = InputSession(handle, name, scope.worker, schema=layout)
    scope.worker.register_input(session)
    return session, Collection(scope, stream)


def new_collection_from(
    scope: Scope, records: Iterable[Any], name: str = "Input"
) -> Tuple[InputSession, Collection]:
    """Like :func:`new_collection`, with ``records`` inserted at the minimum time.

    Example: ``session, numbers = new_collection_from(scope, range(10))``."""
    session, coll = new_collection(scope, name)
    for r in records:
        session.insert(r)
    return session, coll
