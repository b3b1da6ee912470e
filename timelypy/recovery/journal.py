"""An input journal: the updates of each input batch, kept until a checkpoint covers them.

A checkpoint is taken every N seconds or every K times, not after every batch of input, so a
crash loses the batches applied since the last one. A source that can replay them from a
position (a Kafka offset, a file) needs nothing more; a source that commits a batch once it was
handed over (Spark's Structured Streaming commits a micro-batch when ``foreachBatch`` returns)
does not deliver it again. The journal closes that gap, as Feldera's input log does: before a
batch's epoch closes, its updates, as applied (records, diffs, times, the session time they
were applied at and the time the session advanced to after them), are written to the checkpoint
location as one file per batch. After a restore, the entries the checkpoint does not cover are
applied again, in order, at the same times; the checkpoint's manifest says which batch it
covers up to (its ``extra``).

Layout, beside the checkpoint store's files (:mod:`.store`)::

    journal/<name>/<batch_id, 20 digits>.chunk

Each file is a chunk file of the checkpoint format (:mod:`.format`: an 80-byte header with a
SHA-256 of the payload, msgpack, or cloudpickle signed with the store's ``signing_key`` for
records msgpack cannot carry), written atomically (a temporary name, ``fsync``, then a rename;
one put on an object store): a crash in the middle of a write leaves no entry, or a whole one.
A file that is truncated or corrupt is refused with a
:class:`~timelypy.errors.CheckpointError` naming it: skipping it would lose the batch.

Pruning (:meth:`InputJournal.prune_covered`): an entry may go once every kept checkpoint covers
it: a restore falls back to an older kept checkpoint when a newer one is damaged, and then needs
every entry after the older one.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Iterator, List, Optional, Union

from ..errors import CheckpointError
from .format import decode_chunk, encode_chunk
from .locations import Location, open_location

if TYPE_CHECKING:
    from .store import CheckpointStore

__all__ = ["InputJournal", "JournalEntry", "JOURNAL_DIR"]

log = logging.getLogger(__name__)

JOURNAL_DIR = "journal"
"""The directory of the journals under a checkpoint location."""
_NAME = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9_.-]*")
_ENTRY = re.compile(r"(\d{20})\.chunk")


@dataclass
class JournalEntry:
    """The updates of one input batch as they were applied.

    ``batch_id``: the batch's id (a micro-batch's ``batch_id``); ids only grow. ``input``: the
    session input they went to. ``epoch``: the session's time when they were applied (an update
    whose time is None was at it). ``advance``: the time the session advanced to after them (None:
    no advance). ``records``, ``diffs``: one per update. ``times``: one per update, or None
    when every update was at ``epoch``. ``path``: the file it was read from ("" before written).
    """

    batch_id: int
    input: str
    epoch: Any
    advance: Any
    records: List[Any]
    diffs: List[int]
    times: Optional[List[Any]] = None
    path: str = field(default="", compare=False)

    def __post_init__(self) -> None:
        if len(self.diffs) != len(self.records):
            raise ValueError(
                f"journal entry of batch {self.batch_id}: {len(self.records)} records and "
                f"{len(self.diffs)} diffs"
            )
        if self.times is not None and len(self.times) != len(self.records):
            raise ValueError(
                f"journal entry of batch {self.batch_id}: {len(self.records)} records and "
                f"{len(self.times)} times"
            )

    def payload(self) -> dict:
        """The entry as the chunk's payload: records that are all tuples of one width are
        stored as columns (``"columns"``, one list per field; 15x faster to encode than a tuple
        each), any others as they are (``"records"``)."""
        payload = {
            "batch_id": self.batch_id,
            "input": self.input,
            "epoch": self.epoch,
            "advance": self.advance,
            "diffs": self.diffs,
            "times": self.times,
        }
        columns = _as_columns(self.records)
        if columns is None:
            payload["records"] = self.records
        else:
            payload["columns"] = columns
        return payload

    @staticmethod
    def records_of(payload: dict) -> List[Any]:
        """The records of a :meth:`payload`."""
        if "columns" in payload:
            return list(zip(*payload["columns"]))
        return payload["records"]


def _as_columns(records: List[Any]) -> Optional[List[List[Any]]]:
    """The fields of ``records`` as columns, when every record is a tuple of one width."""
    if not records or type(records[0]) is not tuple or not records[0]:
        return None
    width = len(records[0])
    if not all(type(r) is tuple and len(r) == width for r in records):
        return None
    return [[r[i] for r in records] for i in range(width)]


def _checked_name(name: str, what: str) -> str:
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise ValueError(
            f"{what} {name!r}: a journal is named by letters, digits, '-', '_' and '.' only, "
            "not starting with '.' (pass journal_name= with such a name)"
        )
    return name


class InputJournal:
    """The journal ``name`` (one per input feed) at a checkpoint ``location`` (a local
    directory or an fsspec / ``pyarrow.fs`` URL, as :class:`~timelypy.recovery.Checkpoints`
    takes; or an opened :class:`~timelypy.recovery.locations.Location`). ``signing_key``:
    signs entries whose records need pickle, and is required to read them back.

    >>> import tempfile
    >>> journal = InputJournal(tempfile.mkdtemp(), "edges")
    >>> _ = journal.write(JournalEntry(0, "edges", 0, 1, [(1, 2)], [1]))
    >>> [(e.batch_id, e.records, e.advance) for e in journal.entries(after=None)]
    [(0, [(1, 2)], 1)]
    """

    def __init__(
        self,
        location: Union[str, Location],
        name: str,
        signing_key: Optional[bytes] = None,
    ) -> None:
        self.name = _checked_name(name, "journal")
        self.files: Location = open_location(location) if isinstance(location, str) else location
        self.signing_key = signing_key
        self.directory = f"{JOURNAL_DIR}/{self.name}"

    def __repr__(self) -> str:
        return f"InputJournal({self.files.url!r}, {self.name!r})"

    def path(self, batch_id: int) -> str:
        """The file of ``batch_id``, relative to the location."""
        if not isinstance(batch_id, int) or batch_id < 0:
            raise ValueError(
                f"journal {self.name!r}: batch id must be an int >= 0, not {batch_id!r}"
            )
        return f"{self.directory}/{batch_id:020d}.chunk"

    def url(self, batch_id: int) -> str:
        """Where the file of ``batch_id`` is, for messages."""
        return f"{self.files.url.rstrip('/')}/{self.path(batch_id)}"

    # -- writing
    def write(self, entry: JournalEntry) -> int:
        """Write ``entry`` as one file, atomically; its size in bytes. An entry of a batch id
        the journal already holds replaces it (a batch refused after it was written, then run
        again)."""
        what = f"journal {self.name!r}, batch {entry.batch_id}"
        data, _encoding = encode_chunk(entry.payload(), self.signing_key, what)
        self.files.put_atomic(self.path(entry.batch_id), data)
        return len(data)

    def delete(self, batch_id: int) -> None:
        """Remove the entry of ``batch_id`` (no error when there is none)."""
        self.files.delete(self.path(batch_id))

    # -- reading
    def batch_ids(self) -> List[int]:
        """The batch ids of the entries, ascending (temporary files of a write cut short by a
        crash are not entries)."""
        ids = []
        for path in self.files.list(self.directory):
            match = _ENTRY.fullmatch(path.rsplit("/", 1)[-1])
            if match:
                ids.append(int(match.group(1)))
        return sorted(ids)

    def read(self, batch_id: int) -> JournalEntry:
        """The entry of ``batch_id``, verified (header, SHA-256, signature for pickle, and that
        it is this journal's entry of that batch); a :class:`~timelypy.errors.CheckpointError`
        naming the file and the reason otherwise."""
        path = self.path(batch_id)
        url = self.url(batch_id)
        try:
            data = self.files.read(path)
        except FileNotFoundError:
            raise self._refuse(url, "missing") from None
        value = decode_chunk(data, url, self.signing_key)
        try:
            entry = JournalEntry(
                batch_id=value["batch_id"],
                input=value["input"],
                epoch=value["epoch"],
                advance=value["advance"],
                records=JournalEntry.records_of(value),
                diffs=value["diffs"],
                times=value["times"],
                path=url,
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise self._refuse(url, f"corrupt: not a journal entry ({exc})") from None
        if entry.batch_id != batch_id:
            raise self._refuse(url, f"corrupt: it holds batch {entry.batch_id!r}, not {batch_id}")
        return entry

    def entries(self, after: Optional[int]) -> Iterator[JournalEntry]:
        """The entries of the batch ids after ``after`` (None: all), in order, each verified."""
        for batch_id in self.batch_ids():
            if after is None or batch_id > after:
                yield self.read(batch_id)

    @staticmethod
    def _refuse(url: str, reason: str) -> CheckpointError:
        return CheckpointError(f"input journal file {url}: {reason}", path=url, reason=reason)

    # -- pruning
    def prune(self, through: int) -> List[int]:
        """Delete the entries of batch ids up to ``through`` (and temporary files of such
        batches left by a crash); the ids deleted."""
        deleted = []
        for path in self.files.list(self.directory):
            base = path.rsplit("/", 1)[-1]
            digits = base.split(".", 1)[0]
            if not digits.isdigit() or int(digits) > through:
                continue
            self.files.delete(path)
            if _ENTRY.fullmatch(base):
                deleted.append(int(digits))
        if deleted:
            log.debug("journal %r: pruned batches %d to %d", self.name, deleted[0], deleted[-1])
        return sorted(deleted)

    def prune_covered(self, store: "CheckpointStore", key: str) -> Optional[int]:
        """Delete the entries every checkpoint kept in ``store`` covers: each manifest's
        ``extra[key]["last_batch_id"]`` says up to which batch it does. Returns the batch id
        pruned through, or None when nothing may go (no checkpoint, or one that does not know
        this journal: a restore from it would need every entry)."""
        covered: Optional[int] = None
        seen = False
        for checkpoint_id in store.checkpoints():
            try:
                manifest = store.manifest(checkpoint_id)
            except CheckpointError:
                continue  # skipped by a restore too
            seen = True
            mark = manifest.extra.get(key)
            last = mark.get("last_batch_id") if isinstance(mark, dict) else None
            if last is None:
                return None
            covered = last if covered is None else min(covered, last)
        if not seen or covered is None:
            return None
        self.prune(covered)
        return covered
