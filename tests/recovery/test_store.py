"""The checkpoint store: round trips, incremental writes, pruning, refusals and fallback."""

from __future__ import annotations

import datetime
import logging
import os
import pickle
from decimal import Decimal
from fractions import Fraction
from typing import Any, Dict, List
from uuid import UUID

import pytest

from timelypy.dataflow.state import OperatorState
from timelypy.errors import CheckpointError
from timelypy.order import Product
from timelypy.recovery.format import HEADER_SIZE, decode_chunk, encode_chunk
from timelypy.recovery.manifest import fingerprint_difference
from timelypy.recovery.store import CheckpointStore

FINGERPRINT = {"root/0": "InputSession input", "root/3": "Reduce count"}

PLAIN_VALUES: List[Any] = [
    None,
    True,
    False,
    0,
    -7,
    2**63 - 1,
    2**64 + 5,
    -(2**100),
    1.5,
    float("inf"),
    "",
    "snow ☃",
    b"\x00\xff",
    [],
    [1, [2, 3]],
    (),
    (1, "a", (2.5, None)),
    [(1, 2), (3, 4)],
    {"a": 1, "b": [1, 2]},
    {(1, 2): "pair", 3: (4,), None: 0},
    Product(1, 2),
    Product(Product(3, 4), 5),
    Product(2**70, -1),
    {1, 2, 3},
    frozenset({"x", "y"}),
    {frozenset({1}), frozenset({2, 3})},
    datetime.date(2024, 2, 29),
    datetime.datetime(2024, 2, 29, 23, 59, 58, 123456),
    datetime.time(12, 30, 1, 5),
    datetime.timedelta(days=-3, seconds=7, microseconds=9),
    Decimal("1.250"),
    Fraction(-3, 7),
    UUID("12345678-1234-5678-1234-567812345678"),
]


def _state(n: int, salt: str = "", shared: Any = None) -> OperatorState:
    """``n`` keyed pieces: key i's routing hash is i (ints are their own stable hash)."""
    return OperatorState(
        keyed=[(i, [(("k", i), 5, 1), (f"v{i}{salt}", Product(1, i), -1)]) for i in range(n)],
        shared=shared,
    )


def _write(store: CheckpointStore, states_by_worker: List[Dict[str, OperatorState]], time=5):
    cid = store.new_checkpoint_id()
    parts = [store.write_part(cid, w, s) for w, s in enumerate(states_by_worker)]
    return store.publish(cid, time, len(states_by_worker), parts, FINGERPRINT), parts


def _chunk_names(store: CheckpointStore, manifest: Any) -> set:
    """The names of every chunk file ``manifest`` references (its part indexes included)."""
    names = {p["index"] for p in manifest.parts}
    for part in manifest.parts:
        index = (
            store._read_chunk([part["index"], part["size"]])
            if store.files.size(f"chunks/{part['index'][:2]}/{part['index']}.chunk")
            else None
        )
        if index is None:
            continue
        for entry in index["operators"].values():
            names |= {ref[0] for ref in entry["keyed"]}
            names |= {entry["shared"][0]} if entry["shared"] else set()
    return names


def _types(value: Any) -> Any:
    """The exact types all the way down (so that a tuple read back as a list is caught)."""
    if isinstance(value, (list, tuple, set, frozenset)):
        return (type(value), [_types(v) for v in sorted(value, key=repr)])
    if isinstance(value, dict):
        return (dict, sorted((repr(k), _types(k), _types(v)) for k, v in value.items()))
    return type(value)


def test_every_plain_type_round_trips_exactly_through_msgpack(tmp_path):
    store = CheckpointStore(str(tmp_path))
    states = {
        "root/1": OperatorState(keyed=[(i, v) for i, v in enumerate(PLAIN_VALUES)], version=3),
        "root/2": OperatorState(shared={"all": PLAIN_VALUES}),
        "root/4": OperatorState(),
    }
    manifest, parts = _write(store, [states], time=Product(4, 0))
    assert parts[0]["files_written"] == parts[0]["chunks"]  # nothing to reuse yet
    (read,) = store.read_states(store.latest())
    assert read["root/1"].keyed == states["root/1"].keyed
    assert read["root/1"].version == 3
    assert _types(read["root/1"].keyed) == _types(states["root/1"].keyed)
    assert read["root/2"].shared == states["root/2"].shared
    assert _types(read["root/2"].shared) == _types(states["root/2"].shared)
    assert read["root/4"] == OperatorState()
    assert store.latest().time == Product(4, 0)
    for path in (tmp_path / "chunks").rglob("*.chunk"):  # plain data never needs pickle
        assert path.read_bytes()[6] == 0, path


def test_numpy_scalars_round_trip_without_pickle(tmp_path):
    np = pytest.importorskip("numpy")
    store = CheckpointStore(str(tmp_path))
    values = [np.int64(-3), np.float32(1.5), np.uint8(200), np.bool_(True)]
    _write(store, [{"root/1": OperatorState(shared=values)}])
    (read,) = store.read_states(store.latest())
    assert read["root/1"].shared == values
    assert [type(v) for v in read["root/1"].shared] == [type(v) for v in values]


def test_the_manifest_keeps_time_peers_fingerprint_and_extra(tmp_path):
    store = CheckpointStore(str(tmp_path))
    extra = {"sink_batch_id": 41, "positions": {("input", 0): Product(3, 1)}, "raw": b"\x01"}
    states = [{"root/0": _state(10)}, {"root/0": _state(7)}, {"root/0": OperatorState()}]
    cid = store.new_checkpoint_id()
    parts = [store.write_part(cid, w, s) for w, s in enumerate(states)]
    published = store.publish(cid, Product(9, 0), 3, parts, FINGERPRINT, extra)
    latest = CheckpointStore(str(tmp_path)).latest()
    assert latest.checkpoint_id == cid == published.checkpoint_id
    assert (latest.time, latest.peers, latest.fingerprint) == (Product(9, 0), 3, FINGERPRINT)
    assert latest.extra == extra
    assert abs(latest.created - published.created) < 1e-6
    read = store.read_states(latest)
    assert [r["root/0"].keyed for r in read] == [s["root/0"].keyed for s in states]


def test_keyed_pieces_are_cut_into_chunks_by_key(tmp_path):
    store = CheckpointStore(str(tmp_path), chunk_pieces=16)
    state = _state(2000)
    _, parts = _write(store, [{"root/3": state}])
    assert parts[0]["chunks"] > 20  # about 2000 / 16 keyed chunks, and the part index
    (read,) = store.read_states(store.latest())
    assert sorted(read["root/3"].keyed) == sorted(state.keyed)


def test_a_second_checkpoint_writes_only_the_changed_operators_chunk(tmp_path):
    store = CheckpointStore(str(tmp_path), chunk_pieces=64)
    first = {"root/1": _state(3000), "root/2": _state(500, shared={"n": 1}), "root/3": _state(40)}
    _, parts1 = _write(store, [first])
    files_before = set((tmp_path / "chunks").rglob("*.chunk"))
    second = dict(first)
    changed = list(first["root/1"].keyed)
    changed[1234] = (1234, ["a new value"])
    second["root/1"] = OperatorState(keyed=changed)
    _, parts2 = _write(store, [second])
    new_files = set((tmp_path / "chunks").rglob("*.chunk")) - files_before
    # one keyed chunk of root/1 and the part index, nothing else
    assert parts2[0]["files_written"] == 2 == len(new_files)
    assert parts2[0]["chunks"] == parts1[0]["chunks"]
    written = sum(p.stat().st_size for p in new_files)
    assert parts2[0]["bytes_written"] == written < parts2[0]["bytes"] / 8
    (read,) = store.read_states(store.latest())
    assert dict(read["root/1"].keyed)[1234] == ["a new value"]
    assert read["root/2"].shared == {"n": 1}


def test_an_unchanged_state_writes_only_its_part_index(tmp_path):
    store = CheckpointStore(str(tmp_path))
    states = [{"root/1": _state(100)}, {"root/1": _state(50, "w1")}]
    _write(store, states)
    _, parts = _write(store, states)
    # each part index names its checkpoint, so it is new; every state chunk is reused
    assert [p["files_written"] for p in parts] == [1, 1]


def test_keep_prunes_old_manifests_and_the_chunks_only_they_use(tmp_path):
    store = CheckpointStore(str(tmp_path), keep=2)
    manifests = []
    for round_ in range(5):
        m, _ = _write(store, [{"root/1": _state(30, salt=str(round_)), "root/2": _state(5)}])
        manifests.append(m)
    assert store.checkpoints() == [m.checkpoint_id for m in reversed(manifests[-2:])]
    # exactly the chunks of the two kept checkpoints remain (root/2's are shared by all five)
    live = {p.stem for p in (tmp_path / "chunks").rglob("*.chunk")}
    kept = [_chunk_names(store, m) for m in manifests[-2:]]
    assert live == kept[0] | kept[1]
    assert all(_chunk_names(store, m) - live for m in manifests[:3])  # their root/1 is gone
    for m in manifests[-2:]:  # every kept checkpoint still reads in full
        assert store.read_states(m)[0]["root/2"].keyed == _state(5).keyed


def test_pruning_spares_the_chunks_of_a_checkpoint_being_written(tmp_path):
    store = CheckpointStore(str(tmp_path), keep=1)
    first, _ = _write(store, [{"root/1": _state(10)}])
    cid = store.new_checkpoint_id()
    in_flight = store.write_part(cid, 0, {"root/1": _state(10, "next")})
    other, _ = _write(store, [{"root/1": _state(10, "other")}])  # publishes, prunes meanwhile
    assert store.checkpoints() == [other.checkpoint_id]  # the first manifest went
    # worker 1 of the checkpoint in flight reuses a chunk only the pruned checkpoint used
    parts = [in_flight, store.write_part(cid, 1, {"root/1": _state(10)})]
    published = CheckpointStore(str(tmp_path), keep=2).publish(cid, 6, 2, parts, FINGERPRINT)
    read = store.read_states(published)
    assert [r["root/1"].keyed for r in read] == [_state(10, "next").keyed, _state(10).keyed]
    assert first.checkpoint_id not in store.checkpoints()


def test_an_abandoned_checkpoint_stops_protecting_chunks_after_the_grace(tmp_path):
    store = CheckpointStore(str(tmp_path), keep=1, pending_grace=0.0)
    store.write_part(store.new_checkpoint_id(), 0, {"root/1": _state(10, "crashed")})
    _write(store, [{"root/1": _state(10)}])
    m, _ = _write(store, [{"root/1": _state(10, "b")}])
    assert {p.stem for p in (tmp_path / "chunks").rglob("*.chunk")} == _chunk_names(store, m)
    assert not list((tmp_path / "pending").iterdir())


def test_a_crash_before_the_manifest_leaves_the_previous_checkpoint_latest(tmp_path):
    store = CheckpointStore(str(tmp_path))
    first, _ = _write(store, [{"root/1": _state(10)}, {"root/1": _state(3)}])
    cid = store.new_checkpoint_id()
    store.write_part(cid, 0, {"root/1": _state(10, "x")})  # worker 1 and the driver died here
    assert store.latest().checkpoint_id == first.checkpoint_id
    with pytest.raises(CheckpointError, match="unfinished: no manifest") as info:
        store.manifest(cid)
    assert info.value.path == f"manifests/{cid}.json"


def test_publish_refuses_a_checkpoint_with_a_missing_part(tmp_path):
    store = CheckpointStore(str(tmp_path))
    cid = store.new_checkpoint_id()
    part = store.write_part(cid, 0, {"root/1": _state(3)})
    with pytest.raises(CheckpointError, match=r"unfinished: parts of 2 workers .*missing \[1\]"):
        store.publish(cid, 3, 2, [part], FINGERPRINT)
    assert store.latest() is None


def _corrupt_latest_chunk(tmp_path, manifest, how: str) -> str:
    """Damage the first keyed chunk of worker 0's first operator; its path."""
    store = CheckpointStore(str(tmp_path))
    index = store._read_chunk([manifest.parts[0]["index"], manifest.parts[0]["size"]])
    name = next(iter(index["operators"].values()))["keyed"][0][0]
    path = tmp_path / "chunks" / name[:2] / f"{name}.chunk"
    data = path.read_bytes()
    if how == "truncate":
        path.write_bytes(data[:-3])
    elif how == "flip":
        path.write_bytes(data[:-1] + bytes([data[-1] ^ 1]))
    elif how == "version":
        path.write_bytes(data[:4] + (99).to_bytes(2, "little") + data[6:])
    elif how == "delete":
        path.unlink()
    return f"chunks/{name[:2]}/{name}.chunk"


@pytest.mark.parametrize(
    "how, reason",
    [
        ("truncate", r"truncated"),
        ("flip", r"corrupt: its SHA-256 differs from its name"),
        ("version", r"format version 99; this timelypy reads version 2"),
        ("delete", r"missing"),
    ],
)
def test_a_damaged_chunk_is_refused_naming_the_file_and_latest_falls_back(
    tmp_path, caplog, how, reason
):
    store = CheckpointStore(str(tmp_path))
    good, _ = _write(store, [{"root/1": _state(20)}])
    bad, _ = _write(store, [{"root/1": _state(20, "newer")}])
    path = _corrupt_latest_chunk(tmp_path, bad, how)
    with pytest.raises(CheckpointError, match=reason) as info:
        store.read_states(bad)
    assert info.value.path == path and path in str(info.value)
    with caplog.at_level(logging.WARNING, logger="timelypy.recovery.store"):
        loaded = store.load_latest()
    assert loaded[0].checkpoint_id == good.checkpoint_id
    assert loaded[1][0]["root/1"].keyed == _state(20).keyed
    assert bad.checkpoint_id in caplog.text and path in caplog.text
    if how in ("truncate", "delete"):  # visible to latest() without reading every chunk
        assert store.latest().checkpoint_id == good.checkpoint_id


@pytest.mark.parametrize(
    "damage, reason",
    [
        (lambda d: d[: len(d) // 2], "truncated or corrupt: not JSON"),
        (lambda d: d.replace(b'"peers": 1', b'"peers": 7'), "corrupt: the SHA-256 of its body"),
        (lambda d: d.replace(b'"format_version": 2', b'"format_version": 3'), "format version 3"),
        (lambda d: b"{}", "not a timelypy checkpoint manifest"),
    ],
)
def test_a_damaged_manifest_is_refused_and_skipped(tmp_path, caplog, damage, reason):
    store = CheckpointStore(str(tmp_path))
    good, _ = _write(store, [{"root/1": _state(4)}])
    bad, _ = _write(store, [{"root/1": _state(4, "b")}])
    path = tmp_path / bad.path
    path.write_bytes(damage(path.read_bytes()))
    with pytest.raises(CheckpointError, match=reason) as info:
        store.manifest(bad.checkpoint_id)
    assert info.value.path == bad.path
    with caplog.at_level(logging.WARNING, logger="timelypy.recovery.store"):
        assert store.latest().checkpoint_id == good.checkpoint_id
    assert bad.path in caplog.text and reason.split(":")[0] in caplog.text


def test_no_valid_checkpoint_gives_none(tmp_path):
    store = CheckpointStore(str(tmp_path / "never-written"))
    assert store.latest() is None and store.load_latest() is None
    bad, _ = _write(store, [{"root/1": _state(4)}])
    (tmp_path / "never-written" / bad.path).write_bytes(b"")
    assert store.latest() is None


class Opaque:
    """A user class msgpack cannot carry."""

    def __init__(self, n):
        self.n = n

    def __eq__(self, other):
        return type(other) is Opaque and other.n == self.n


def test_state_msgpack_cannot_carry_needs_a_signing_key(tmp_path):
    store = CheckpointStore(str(tmp_path))
    with pytest.raises(
        CheckpointError,
        match=r"operator 'root/7' on worker 2: .*'Opaque'.*"
        r"signing_key \(loading pickle executes code",
    ):
        store.write_part(store.new_checkpoint_id(), 2, {"root/7": OperatorState(shared=Opaque(1))})


def test_pickled_chunks_are_signed_and_checked_before_loading(tmp_path):
    key = b"k" * 32
    store = CheckpointStore(str(tmp_path), signing_key=key)
    state = OperatorState(keyed=[(1, Opaque(1)), (2, [Opaque(2)])], shared=Opaque(3))
    manifest, _ = _write(store, [{"root/7": state}])
    (read,) = store.read_states(store.latest())
    assert read["root/7"] == state
    with pytest.raises(CheckpointError, match=r"a pickled chunk, and no signing_key.*executes"):
        CheckpointStore(str(tmp_path)).read_states(manifest)
    with pytest.raises(CheckpointError, match=r"bad signature"):
        CheckpointStore(str(tmp_path), signing_key=b"another key").read_states(manifest)


def test_a_forged_pickle_is_never_loaded(tmp_path, monkeypatch):
    """A chunk rewritten with a valid checksum but no valid signature is refused unread."""
    key = b"secret"
    store = CheckpointStore(str(tmp_path), signing_key=key)
    manifest, _ = _write(store, [{"root/7": OperatorState(shared=Opaque(3))}])
    index = store._read_chunk([manifest.parts[0]["index"], manifest.parts[0]["size"]])
    name, _size = index["operators"]["root/7"]["shared"]
    forged, _ = encode_chunk({"shared": Opaque(4)}, b"attacker's key", "x")
    path = tmp_path / "chunks" / name[:2] / f"{name}.chunk"
    path.write_bytes(forged[: len(path.read_bytes())].ljust(len(path.read_bytes()), b"\0"))
    loads = []
    monkeypatch.setattr(pickle, "loads", lambda *a, **k: loads.append(a))
    with pytest.raises(CheckpointError):
        store.read_states(manifest)
    assert loads == []


def test_a_chunk_whose_payload_and_header_disagree_is_refused():
    data, _ = encode_chunk({"p": [1, 2, 3]}, None, "x")
    with pytest.raises(CheckpointError, match=r"chunks/ab: corrupt: the SHA-256 of its payload"):
        decode_chunk(data[:-1] + bytes([data[-1] ^ 1]), "chunks/ab", None)


def test_the_header_is_documented_size():
    data, encoding = encode_chunk([1, 2], None, "x")
    assert (len(data) > HEADER_SIZE == 80, encoding, data[:4]) == (True, 0, b"TPCK")


def test_fingerprint_difference_says_what_differs():
    saved = {"root/0": "InputSession a", "root/1": "Reduce count", "root/2": "Arrange x"}
    now = {"root/0": "InputSession a", "root/1": "Distinct distinct", "root/5": "Join j"}
    assert fingerprint_difference(saved, now) == [
        "root/1: Reduce count in the checkpoint, Distinct distinct in this program",
        "root/2: Arrange x in the checkpoint, not in this program",
        "root/5: Join j in this program, not in the checkpoint",
    ]
    assert fingerprint_difference(saved, dict(saved)) == []


def test_the_store_travels_to_a_worker_as_its_settings(tmp_path):
    store = CheckpointStore(
        str(tmp_path), keep=4, signing_key=b"k", chunk_pieces=7, pending_grace=5.0
    )
    copy = pickle.loads(pickle.dumps(store))
    assert (copy.keep, copy.signing_key, copy.chunk_pieces, copy.pending_grace) == (4, b"k", 7, 5)
    assert copy.files.url == store.files.url


def test_bad_settings_are_refused(tmp_path):
    with pytest.raises(ValueError, match="keep=0"):
        CheckpointStore(str(tmp_path), keep=0)
    with pytest.raises(TypeError, match="signing_key must be bytes"):
        CheckpointStore(str(tmp_path), signing_key="text")  # type: ignore[arg-type]


@pytest.mark.parametrize("bad", ["../escape", "a/b", ".hidden", ""])
def test_a_checkpoint_id_is_a_plain_file_name(tmp_path, bad):
    store = CheckpointStore(str(tmp_path))
    with pytest.raises(ValueError, match="checkpoint id"):
        store.write_part(bad, 0, {})
    with pytest.raises(ValueError, match="checkpoint id"):
        store.manifest(bad)
    with pytest.raises(ValueError, match="checkpoint id"):
        store.publish(bad, 1, 0, [], {})


def test_a_crash_while_the_manifest_is_written_leaves_the_previous_checkpoint(
    tmp_path, monkeypatch
):
    store = CheckpointStore(str(tmp_path))
    first, _ = _write(store, [{"root/1": _state(10)}])
    cid = store.new_checkpoint_id()
    parts = [store.write_part(cid, 0, {"root/1": _state(10, "x")})]

    def crash(src, dst):
        raise KeyboardInterrupt("killed between the manifest's write and its rename")

    monkeypatch.setattr(os, "replace", crash)
    with pytest.raises(KeyboardInterrupt):
        store.publish(cid, 9, 1, parts, FINGERPRINT)
    monkeypatch.undo()
    # the half-published manifest is there, under its temporary name
    assert [".tmp-" in p.name for p in (tmp_path / "manifests").iterdir()].count(True) == 1
    assert store.latest().checkpoint_id == first.checkpoint_id
    with pytest.raises(CheckpointError, match="unfinished: no manifest"):
        store.manifest(cid)
    later, _ = _write(store, [{"root/1": _state(10, "y")}])
    assert store.latest().checkpoint_id == later.checkpoint_id  # the store goes on
    # once the dead publisher's pending marker is past its grace, its leftovers go
    _write(CheckpointStore(str(tmp_path), keep=1, pending_grace=0.0), [{"root/1": _state(1)}])
    later = store.latest()
    assert [p.name for p in (tmp_path / "manifests").iterdir()] == [f"{later.checkpoint_id}.json"]


def _write_in_a_process(args):
    location, cid, worker, states = args
    return CheckpointStore(location).write_part(cid, worker, states)


@pytest.mark.processes
def test_workers_write_their_parts_in_their_own_processes(tmp_path):
    import concurrent.futures
    import multiprocessing

    store = CheckpointStore(str(tmp_path))
    cid = store.new_checkpoint_id()
    states = [{"root/1": _state(300, str(w)), "root/2": OperatorState(shared=w)} for w in range(3)]
    context = multiprocessing.get_context("spawn")
    with concurrent.futures.ProcessPoolExecutor(2, mp_context=context) as pool:
        jobs = [(str(tmp_path), cid, w, s) for w, s in enumerate(states)]
        parts = list(pool.map(_write_in_a_process, jobs))
    store.publish(cid, Product(2, 0), 3, parts, FINGERPRINT)
    read = store.read_states(store.latest())
    assert [r["root/1"].keyed for r in read] == [s["root/1"].keyed for s in states]
    assert [r["root/2"].shared for r in read] == [0, 1, 2]
