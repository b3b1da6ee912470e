"""Structured Streaming into a session: ``writeStream.foreachBatch(ForeachBatchSink(...))``.

Each micro-batch becomes one epoch of an input, exactly once per ``batch_id``. While the
driver lives, a replayed ``batch_id`` is simply ignored. Across driver restarts the sink keeps
an **input journal** beside the session's checkpoints (:mod:`timelypy.recovery.journal`, the
design of Feldera's input log): Spark commits a micro-batch once ``foreachBatch`` returns, but
the session checkpoints only every N seconds or K times, so the micro-batches between the last
checkpoint and a crash would be lost. Before a micro-batch is applied, its converted updates
(records, diffs, times, the epoch and the time the session advances to after it) are written to
``journal/<name>/<batch_id>.chunk`` at the checkpoint location, and every checkpoint's manifest
records the sink's last applied batch id (``session.add_checkpoint_extra``). A new driver that
restores the session gets a sink that reads that id, applies the journal's later entries again
at their times, and ignores Spark's replay of what they hold. Entries every kept checkpoint
covers are deleted. docs/spark.md lists the kill points and why each is safe.
"""

from __future__ import annotations

import logging
import threading
import time as _time
from typing import TYPE_CHECKING, Any, Dict, List, Optional, Tuple

from ...errors import RecoveryError, SessionInputError
from ...recovery.journal import InputJournal, JournalEntry
from ...recovery.session import open_store
from ...windows.event_time import EventTimeInput
from ...workers.sessions.session import DataflowSession
from .columns import BadRow, Columns, RowReader, SparkConnectorError, SparkInputError
from .event_time import convert_all, event_time_reader
from .loading import DEFAULT_BATCH_ROWS, _check_batch_rows, _reader, apply_changes, arrow_batches

if TYPE_CHECKING:  # pragma: no cover - types only
    from pyspark.sql import DataFrame

__all__ = ["ForeachBatchSink", "EXTRA_PREFIX"]

log = logging.getLogger(__name__)

EXTRA_PREFIX = "spark_sink:"
"""A sink's key in a checkpoint's ``extra`` is this prefix and its name."""

Converted = Tuple[List[Any], List[int], Optional[List[Any]], Optional[int]]


class ForeachBatchSink:
    """``query = df.writeStream.foreachBatch(ForeachBatchSink(session, "edges", columns))``:
    each micro-batch becomes one epoch of ``input`` (the rows checked and converted as
    :func:`~timelypy.connectors.spark.apply_changes` does, applied, the session advanced past
    them; then, if ``probe`` is given, a wait until the probe passed it, at most
    ``wait_timeout`` seconds, default the session's timeout).

    Exactly once: a ``batch_id`` at or below the last one applied is a replay (Spark replays a
    micro-batch after a failure) and is ignored, logged at INFO (listed in :attr:`ignored`);
    ids may jump upward. ``last_batch_id`` starts from a known point (a query resumed from a
    checkpoint while the session kept its state).

    Across driver restarts (``journal``, on by default when the session takes checkpoints:
    ``open_session(..., checkpoint=Checkpoints(location))``): each micro-batch's updates are
    written to the input journal ``name`` (default: ``input``) at the checkpoint location before
    they are applied, and every checkpoint records the last batch id applied. With ``recover``
    (default: when the session was restored), the new sink reads that id from the restored
    checkpoint, applies the journal's later entries again (same records, same times, advancing
    as before: :attr:`replayed`), and ignores Spark's replay of them: restart the query with
    the same ``checkpointLocation``. A fresh (not restored) session refuses a journal that
    already holds entries (an earlier run's), unless ``recover=True`` and the location holds no
    checkpoint (that run crashed before its first: all of it is applied again from the
    journal). Every micro-batch is held on the
    driver while it is written (bound it with ``maxFilesPerTrigger`` or
    ``maxOffsetsPerTrigger``).

    A refused micro-batch raises :class:`SparkInputError` (the query fails; nothing of the
    batch was applied or journaled, and a replay of it is tried again). Spark hands the caller
    only a ``StreamingQueryException`` with the error's text: the sink keeps the exception
    itself in :attr:`last_error` (with ``batch_id`` set on it), so ``raise sink.last_error from
    exc`` after the query failed gives back the typed error and its fields. Calls are
    serialised by :attr:`lock` (Spark calls the sink from a thread of its own: hold
    ``sink.lock`` to use the session from another thread while a query runs).
    :attr:`latencies` maps each applied batch id to its seconds from call to return,
    :attr:`epochs` to the session's time when it was applied, :attr:`rows` to its row count,
    :attr:`journal_bytes` to the size of its journal entry.

    With ``event_time`` (a timestamp column, taken as integer milliseconds since the epoch, or
    an integer column), the rows go in at their event times through an
    :class:`~timelypy.windows.EventTimeInput` (:attr:`feed`) with ``max_out_of_orderness``, and
    after each micro-batch the input advances to the watermark instead of one epoch past it
    (see :mod:`.event_time`); with the journal, the stamped updates are journaled, and a
    recovered sink's watermark starts at the restored session's time.
    """

    def __init__(
        self,
        session: DataflowSession,
        input: str,
        columns: Columns,
        probe: Optional[str] = None,
        *,
        wait_timeout: Optional[float] = None,
        batch_rows: int = DEFAULT_BATCH_ROWS,
        persist: bool = True,
        last_batch_id: Optional[int] = None,
        journal: Optional[bool] = None,
        recover: Optional[bool] = None,
        name: Optional[str] = None,
        max_errors: int = 5,
        event_time: Optional[str] = None,
        max_out_of_orderness: int = 0,
    ) -> None:
        _check_batch_rows(batch_rows)
        self.session = session
        self.input = input
        self.columns = columns
        self.probe = probe
        self.wait_timeout = wait_timeout
        self.batch_rows = batch_rows
        self.persist = persist
        self.max_errors = max_errors
        self.last_batch_id = last_batch_id
        self.name = input if name is None else name
        self.latencies: Dict[int, float] = {}
        self.epochs: Dict[int, Any] = {}
        self.rows: Dict[int, int] = {}
        self.journal_bytes: Dict[int, int] = {}
        self.ignored: List[int] = []
        self.replayed: List[int] = []
        """The batch ids applied again from the journal when the sink recovered."""
        self.last_error: Optional[BaseException] = None
        """The exception the last failed micro-batch raised (a :class:`SparkInputError` for a
        refused one, with ``batch_id``; the session's own errors as they are); None before
        any failure and again once a later micro-batch is applied."""
        self.lock = threading.RLock()
        """Held while a micro-batch is applied."""
        self.journal: Optional[InputJournal] = None
        """The input journal (None: the sink keeps none, exactly once only while it lives)."""
        self._seen_checkpoint: Any = session.last_checkpoint
        self._open_journal(journal)
        restored = session.restored_at is not None
        if recover is None:
            recover = restored and self.journal is not None
        if recover:
            self._recover(restored)
        elif self.journal is not None and last_batch_id is None:
            found = self.journal.batch_ids()
            if found:
                raise SparkConnectorError(
                    f"foreachBatch sink {self.name!r}: the input journal at "
                    f"{self.journal.url(found[0])} (and {len(found) - 1} more) holds batches "
                    f"{found[0]}..{found[-1]} of an earlier run, and this session was not "
                    "restored: restore it (open_session(..., restore=Checkpoints(location))) "
                    "to go on with that run (recover=True when it crashed before its first "
                    "checkpoint), or use a new checkpoint location for a new run"
                )
        self._open_feed(event_time, max_out_of_orderness)

    def _open_feed(self, event_time: Optional[str], max_out_of_orderness: int) -> None:
        """With ``event_time``, :attr:`feed`: made last, so that after a recovery its
        watermark starts at the restored (and replayed) session's time."""
        self.event_time = event_time
        self.feed: Optional[EventTimeInput] = None
        if event_time is not None:
            self.feed = EventTimeInput(self.session, self.input, max_out_of_orderness)

    @property
    def extra_key(self) -> str:
        """The sink's key in every checkpoint's ``extra``."""
        return EXTRA_PREFIX + self.name

    def _open_journal(self, journal: Optional[bool]) -> None:
        checkpoints = self.session.checkpoints
        if journal is None:
            journal = checkpoints is not None
        if not journal:
            return
        if checkpoints is None:
            raise ValueError(
                f"foreachBatch sink {self.name!r}: journal=True needs a session that takes "
                "checkpoints: open_session(..., checkpoint=Checkpoints(location)); the journal "
                "lives at that location"
            )
        self.journal = InputJournal(checkpoints.location, self.name, checkpoints.signing_key)
        self.session.add_checkpoint_extra(self.extra_key, self._mark)

    def _mark(self) -> Dict[str, Any]:
        """What every checkpoint records of the sink: up to which batch it holds."""
        return {"last_batch_id": self.last_batch_id, "input": self.input}

    # -- recovery ---------------------------------------------------------------------------
    def _recover(self, restored: bool) -> None:
        """Take the last batch id from the restored checkpoint and apply the journal's later
        entries again, in order, at their times."""
        if self.journal is None:
            raise ValueError(
                f"foreachBatch sink {self.name!r}: recover=True needs a session that takes "
                "checkpoints: open_session(dataflow, restore=Checkpoints(location))"
            )
        if not restored:
            # a run that crashed before its first checkpoint: the journal holds all of it
            checkpoints = self.session.checkpoints
            published = open_store(checkpoints).checkpoints() if checkpoints else []
            if published:
                raise RecoveryError(
                    f"foreachBatch sink {self.name!r}: recover=True on a session that was not "
                    f"restored, but {checkpoints.location if checkpoints else ''!s} holds "
                    f"checkpoints ({len(published)}): restore the session from them "
                    "(open_session(dataflow, restore=Checkpoints(location))); the journal "
                    "holds only the batches after them"
                )
        manifest = self.session.last_checkpoint
        mark = manifest.extra.get(self.extra_key) if manifest is not None else None
        covered = mark.get("last_batch_id") if isinstance(mark, dict) else None
        self.last_batch_id = covered
        with self.lock:
            for entry in self.journal.entries(after=covered):
                self._replay(entry)
        log.info(
            "foreachBatch sink %r: recovered: the checkpoint covers batches up to %s, %d "
            "applied again from the journal (%s); Spark's replays up to %s will be ignored",
            self.name,
            covered,
            len(self.replayed),
            self.journal,
            self.last_batch_id,
        )

    def _replay(self, entry: JournalEntry) -> None:
        if entry.input != self.input:
            raise RecoveryError(
                f"foreachBatch sink {self.name!r}: journal entry {entry.path} is of input "
                f"{entry.input!r}, this sink feeds {self.input!r}"
            )
        now = self.session.time
        if now != entry.epoch:
            if not now < entry.epoch:
                raise RecoveryError(
                    f"foreachBatch sink {self.name!r}: journal entry {entry.path} (batch "
                    f"{entry.batch_id}) was applied at time {entry.epoch!r}, and the restored "
                    f"session is already at {now!r}: it cannot be applied again at its time"
                )
            self.session.advance_to(entry.epoch)
        self._apply(entry, write=False)
        self.replayed.append(entry.batch_id)

    # -- applying ---------------------------------------------------------------------------
    def _apply(self, entry: JournalEntry, write: bool) -> None:
        """Buffer the entry's updates (checked: a refusal leaves nothing), journal it (if
        ``write``), send them, then advance: the checkpoint an advance may take covers it."""
        session = self.session
        if session.pending:
            session.flush()  # updates made outside the sink go on their own
        try:
            session.update_many(self.input, entry.records, entry.diffs, entry.times)
        except SessionInputError as exc:
            session.discard()
            raise self._session_refused(entry, exc) from exc
        if write and self.journal is not None:
            try:
                self.journal_bytes[entry.batch_id] = self.journal.write(entry)
            except BaseException:
                session.discard()
                raise
        try:
            session.flush()
        except SessionInputError as exc:
            session.discard()
            if write and self.journal is not None:
                self.journal.delete(entry.batch_id)
            raise self._session_refused(entry, exc) from exc
        self.last_batch_id = entry.batch_id
        self.epochs[entry.batch_id] = entry.epoch
        self.rows[entry.batch_id] = len(entry.records)
        if entry.advance is not None:
            session.advance_to(entry.advance)
        self._prune_if_checkpointed()

    def _session_refused(self, entry: JournalEntry, exc: SessionInputError) -> SparkInputError:
        refused = SparkInputError(
            f"micro-batch {entry.batch_id}: input {self.input!r}: refused by the session: "
            f"{exc}. Nothing of the micro-batch was applied.",
            input=self.input,
            value=exc.value,
            reason=f"refused by the session: {exc}",
        )
        refused.batch_id = entry.batch_id
        return refused

    def _prune_if_checkpointed(self) -> None:
        """After a new checkpoint: delete the journal entries every kept checkpoint covers."""
        manifest = self.session.last_checkpoint
        if self.journal is None or manifest is None or manifest is self._seen_checkpoint:
            return
        self._seen_checkpoint = manifest
        checkpoints = self.session.checkpoints
        if checkpoints is None:  # pragma: no cover - the journal needs them
            return
        self.journal.prune_covered(open_store(checkpoints), self.extra_key)

    def _convert(self, df: "DataFrame", now: int) -> Converted:
        """The micro-batch's rows as ``(records, diffs, times, latest)``, every row checked
        first (a bad one refuses the whole micro-batch: :class:`SparkInputError`)."""
        reader = _reader(df, self.columns, self.input)
        rows = reader.select(df)
        small = rows.limit(self.batch_rows + 1).collect()
        if len(small) <= self.batch_rows:
            return _convert_collected(reader, small, now, self.max_errors)
        if self.persist:
            rows = rows.persist()
        try:
            bad = reader.bad_rows(rows, now, self.max_errors)
            if bad:
                raise reader.refused(bad)
            records: List[Any] = []
            diffs: List[int] = []
            times: List[Optional[int]] = []
            timed = False
            for table in arrow_batches(rows):
                try:
                    r, d, t = reader.convert_table(table, now)
                except BadRow as exc:  # pragma: no cover - bad_rows found them first
                    raise reader.refused([exc.bad]) from exc
                records += r
                diffs += d
                if t is None:
                    times += [None] * len(r)
                else:
                    times += t
                    timed = True
        finally:
            if self.persist:
                rows.unpersist()
        return _with_times(records, diffs, times if timed else None, now)

    # -- Spark's call -----------------------------------------------------------------------
    def __call__(self, df: "DataFrame", batch_id: int) -> None:
        """Apply micro-batch ``batch_id`` (``df``) as one epoch, unless it was applied."""
        batch_id = int(batch_id)
        with self.lock:
            if self.last_batch_id is not None and batch_id <= self.last_batch_id:
                log.info(
                    "foreachBatch sink for input %r: micro-batch %d replayed (last applied "
                    "%d): ignored",
                    self.input,
                    batch_id,
                    self.last_batch_id,
                )
                self.ignored.append(batch_id)
                return
            start = _time.monotonic()
            epoch = self.session.time
            try:
                try:
                    rows = self._micro_batch(df, batch_id, epoch)
                except SparkInputError as exc:
                    raise _numbered(exc, batch_id) from exc
                if self.probe is not None:
                    self.session.wait(self.probe, timeout=self.wait_timeout)
            except BaseException as exc:
                self.last_error = exc  # Spark passes on only its text: keep the typed error
                raise
            self.last_error = None
            self.latencies[batch_id] = _time.monotonic() - start
            log.debug(
                "foreachBatch sink for input %r: micro-batch %d, %d rows, epoch %r, %.3f s",
                self.input,
                batch_id,
                rows,
                epoch,
                self.latencies[batch_id],
            )

    def _micro_batch(self, df: "DataFrame", batch_id: int, epoch: Any) -> int:
        """Apply one micro-batch (at event time, through the journal, or as an epoch)."""
        if self.feed is not None:
            return self._at_event_time(df, batch_id, epoch)
        if self.journal is not None:
            return self._journaled(df, batch_id, epoch)
        rows = apply_changes(
            self.session,
            self.input,
            df,
            self.columns,
            advance=True,
            batch_rows=self.batch_rows,
            persist=self.persist,
            max_errors=self.max_errors,
        )
        self.last_batch_id = batch_id
        self.epochs[batch_id] = epoch
        self.rows[batch_id] = rows
        return rows

    def _at_event_time(self, df: "DataFrame", batch_id: int, epoch: Any) -> int:
        """Every row of the micro-batch converted and checked first (a bad one refuses it
        whole), then stamped by :attr:`feed` and sent in one flush; the input advances to the
        watermark. With the journal, the stamped updates are journaled first."""
        feed = self.feed
        assert feed is not None and self.event_time is not None
        with_time, reader = event_time_reader(df, self.columns, self.event_time, self.input)
        try:
            records, diffs, times = convert_all(reader, reader.select(with_time), arrow_batches)
        except BadRow as exc:
            raise reader.refused([exc.bad]) from exc
        if self.journal is not None:
            stamps = feed.stamp_columns(times)
            advance = feed.watermark if feed.watermark > epoch else None
            entry = JournalEntry(batch_id, self.input, epoch, advance, records, diffs, stamps)
            self._apply(entry, True)
            return len(records)
        if self.session.pending:
            self.session.flush()  # updates made outside the sink go on their own
        try:
            feed.push_columns(records, times, diffs)
        except SessionInputError as exc:
            self.session.discard()
            entry = JournalEntry(batch_id, self.input, epoch, None, records, diffs, times)
            raise self._session_refused(entry, exc) from exc
        self.last_batch_id = batch_id
        self.epochs[batch_id] = epoch
        self.rows[batch_id] = len(records)
        return len(records)

    def _journaled(self, df: "DataFrame", batch_id: int, epoch: Any) -> int:
        if not isinstance(epoch, int):
            raise SparkInputError(
                f"input {self.input!r}: the foreachBatch sink needs integer session times, the "
                f"session is at {epoch!r}",
                input=self.input,
                value=epoch,
            )
        records, diffs, times, latest = self._convert(df, epoch)
        advance = max(epoch, latest if latest is not None else epoch) + 1
        self._apply(JournalEntry(batch_id, self.input, epoch, advance, records, diffs, times), True)
        return len(records)

    def __repr__(self) -> str:
        return (
            f"ForeachBatchSink(input={self.input!r}, last_batch_id={self.last_batch_id}, "
            f"applied={len(self.latencies)}, ignored={len(self.ignored)}, "
            f"replayed={len(self.replayed)}, journal={self.journal is not None})"
        )


def _numbered(exc: SparkInputError, batch_id: int) -> SparkInputError:
    """``exc`` with the micro-batch named (once) and ``batch_id`` set."""
    if exc.batch_id == batch_id:
        return exc
    refused = SparkInputError(
        f"micro-batch {batch_id}: {exc}",
        input=exc.input,
        column=exc.column,
        row=exc.row,
        value=exc.value,
        reason=exc.reason,
        rows=exc.rows,
    )
    refused.batch_id = batch_id
    return refused


def _convert_collected(reader: RowReader, rows: List[Any], now: int, max_errors: int) -> Converted:
    """Check and convert collected rows (up to ``max_errors`` bad ones are named)."""
    items = reader.convert_rows(rows, now, max_errors)
    records = [record for (record, _, _), _ in items]
    diffs = [diff for (_, diff, _), _ in items]
    times: List[Optional[int]] = [t for (_, _, t), _ in items]
    timed = any(t is not None for t in times)
    return _with_times(records, diffs, times if timed else None, now)


def _with_times(
    records: List[Any], diffs: List[int], times: Optional[List[Optional[int]]], now: int
) -> Converted:
    """``times`` with the input's time (None) made ``now``, or None when all are ``now``; and
    the latest time used (None: no update)."""
    if times is None:
        return records, diffs, None, (now if records else None)
    filled = [now if t is None else t for t in times]
    return records, diffs, filled, max(filled, default=None)
