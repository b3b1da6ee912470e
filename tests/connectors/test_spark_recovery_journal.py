"""The input journal of the Spark sink, without Spark: entries written, read, pruned once the
kept checkpoints cover them, and damaged entries refused with the file named; a session's
contributions to its checkpoints' ``extra``."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

import timelypy as tp
from timelypy.errors import CheckpointError
from timelypy.recovery.journal import InputJournal, JournalEntry
from timelypy.recovery.store import CheckpointStore


def entry(batch_id: int, n: int = 3, timed: bool = False) -> JournalEntry:
    records = [(batch_id, i, f"r{i}") for i in range(n)]
    times = [batch_id + i for i in range(n)] if timed else None
    return JournalEntry(batch_id, "edges", batch_id, batch_id + n, records, [1, -1, 2][:n], times)


def test_entries_round_trip_in_batch_order(tmp_path):
    journal = InputJournal(str(tmp_path), "edges")
    for b in (3, 0, 12, 1):
        assert journal.write(entry(b, timed=b == 12)) > 80  # header and payload
    assert journal.batch_ids() == [0, 1, 3, 12]
    read = list(journal.entries(after=1))
    assert [e.batch_id for e in read] == [3, 12]
    assert read[1] == entry(12, timed=True)  # records stay tuples, times per update
    assert read[0].times is None and read[0].records[0] == (3, 0, "r0")
    assert read[1].path.endswith("journal/edges/00000000000000000012.chunk")
    assert [e.batch_id for e in journal.entries(after=None)] == [0, 1, 3, 12]


@pytest.mark.parametrize(
    "records",
    [[1, 2, 3], [(1, 2), (3,), (4, 5)], [(1, (2, "x")), (3, (4, "y"))], [("a", None)], []],
)
def test_records_of_any_shape_come_back_as_written(tmp_path, records):
    journal = InputJournal(str(tmp_path), "any")
    written = JournalEntry(7, "any", 2, 3, records, [1] * len(records), [2] * len(records))
    journal.write(written)
    assert journal.read(7) == written


def test_a_write_cut_short_by_a_crash_is_not_an_entry(tmp_path):
    journal = InputJournal(str(tmp_path), "edges")
    journal.write(entry(0))
    directory = tmp_path / "journal" / "edges"
    (directory / "00000000000000000001.chunk.tmp-1a2b3c4d").write_bytes(b"TPCK half")
    assert journal.batch_ids() == [0]
    assert journal.prune(1) == [0]  # the temporary file of batch 1 goes with it
    assert os.listdir(directory) == []


@pytest.mark.parametrize(
    "damage,reason",
    [
        (lambda data: data[:-5], "truncated"),
        (lambda data: data[:-1] + bytes([data[-1] ^ 1]), "corrupt"),
        (lambda data: b"", "truncated"),
    ],
)
def test_a_damaged_entry_is_refused_naming_the_file(tmp_path, damage, reason):
    journal = InputJournal(str(tmp_path), "edges")
    journal.write(entry(0))
    journal.write(entry(1))
    path = tmp_path / "journal" / "edges" / "00000000000000000001.chunk"
    path.write_bytes(damage(path.read_bytes()))
    entries = journal.entries(after=None)
    assert next(entries).batch_id == 0
    with pytest.raises(CheckpointError) as info:
        next(entries)
    assert info.value.path.endswith("journal/edges/00000000000000000001.chunk")
    assert str(path) in str(info.value) and reason in info.value.reason


def test_an_entry_under_another_batch_s_name_is_refused(tmp_path):
    journal = InputJournal(str(tmp_path), "edges")
    journal.write(entry(4))
    directory = tmp_path / "journal" / "edges"
    os.replace(directory / f"{4:020d}.chunk", directory / f"{5:020d}.chunk")
    with pytest.raises(
        CheckpointError, match=r"00000000000000000005\.chunk: corrupt: it holds batch 4"
    ):
        journal.read(5)
    with pytest.raises(CheckpointError, match="missing"):
        journal.read(4)


class Opaque:
    def __init__(self, x: int) -> None:
        self.x = x

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Opaque) and other.x == self.x

    def __hash__(self) -> int:
        return self.x


def test_records_that_need_pickle_need_the_signing_key(tmp_path):
    plain = InputJournal(str(tmp_path), "objects")
    record = JournalEntry(0, "objects", 0, 1, [Opaque(1)], [1])
    with pytest.raises(CheckpointError, match="journal 'objects', batch 0.*signing_key"):
        plain.write(record)
    signed = InputJournal(str(tmp_path), "objects", signing_key=b"k" * 32)
    signed.write(record)
    assert signed.read(0).records == [Opaque(1)]
    with pytest.raises(CheckpointError, match="no signing_key"):
        plain.read(0)
    with pytest.raises(CheckpointError, match="bad signature"):
        InputJournal(str(tmp_path), "objects", signing_key=b"x" * 32).read(0)


def test_names_and_entries_are_checked():
    with pytest.raises(ValueError, match="journal '../x'"):
        InputJournal("/tmp", "../x")
    with pytest.raises(ValueError, match="2 records and 1 diffs"):
        JournalEntry(0, "edges", 0, 1, [1, 2], [1])


def publish(store: CheckpointStore, time: int, extra: dict) -> None:
    checkpoint = store.new_checkpoint_id()
    parts = [store.write_part(checkpoint, 0, {})]
    store.publish(checkpoint, time, 1, parts, {}, extra)


def test_pruned_only_what_every_kept_checkpoint_covers(tmp_path):
    store = CheckpointStore(str(tmp_path), keep=2)
    journal = InputJournal(str(tmp_path), "edges")
    for b in range(8):
        journal.write(entry(b))
    key = "spark_sink:edges"
    assert journal.prune_covered(store, key) is None  # no checkpoint: nothing may go
    publish(store, 1, {})  # a checkpoint from before the sink: a restore from it needs all
    publish(store, 3, {key: {"last_batch_id": 2}})
    assert journal.prune_covered(store, key) is None and journal.batch_ids() == list(range(8))
    publish(store, 6, {key: {"last_batch_id": 5}})  # keeps the checkpoints at 3 and 6
    assert journal.prune_covered(store, key) == 2
    assert journal.batch_ids() == [3, 4, 5, 6, 7]
    # a damaged newest manifest is skipped by a restore (it falls back), and here
    publish(store, 8, {key: {"last_batch_id": 7}})
    newest = sorted((tmp_path / "manifests").iterdir())[-1]
    newest.write_bytes(newest.read_bytes()[:-10])
    assert journal.prune_covered(store, key) == 5
    assert journal.batch_ids() == [6, 7]


def dataflow(scope):
    numbers_in, numbers = scope.new_collection()
    return {"numbers": numbers_in, "out": numbers.capture(), "probe": numbers.probe()}


def test_a_session_s_contributions_to_its_checkpoints_come_back_after_a_restore(tmp_path):
    every = tp.Checkpoints(str(tmp_path), every_times=2)
    position = {"offset": 0}
    with tp.open_session(dataflow, checkpoint=every) as s:
        assert s.checkpoints == every
        s.add_checkpoint_extra("source", lambda: dict(position))
        for t in range(5):
            s.insert("numbers", t)
            position["offset"] = t + 1
            s.advance_to(t + 1)  # checkpoints at 2 and 4
        assert s.last_checkpoint.extra["source"] == {"offset": 4}
        with pytest.raises(ValueError, match="'backend'"):
            s.add_checkpoint_extra("backend", dict)
        s.remove_checkpoint_extra("source")
        s.advance_to(6)
        assert "source" not in s.last_checkpoint.extra
    with tp.open_session(dataflow, restore=str(tmp_path)) as s:
        assert s.time == 6 and s.checkpoints is None
        assert "source" not in s.last_checkpoint.extra
    Path(tmp_path, "manifests", sorted(os.listdir(tmp_path / "manifests"))[-1]).unlink()
    with tp.open_session(dataflow, restore=str(tmp_path)) as s:  # the one before
        assert s.time == 4 and s.last_checkpoint.extra["source"] == {"offset": 4}


def test_a_journal_at_an_object_store_url():
    pytest.importorskip("fsspec")
    import secrets

    url = f"memory://timelypy-journal-{secrets.token_hex(4)}/job"
    journal = InputJournal(url, "edges")
    for b in range(3):
        journal.write(entry(b))
    assert journal.batch_ids() == [0, 1, 2]
    assert journal.read(1) == entry(1)
    assert journal.url(1) == f"{url}/journal/edges/{1:020d}.chunk"
    assert journal.prune(1) == [0, 1] and journal.batch_ids() == [2]
