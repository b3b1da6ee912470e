"""Key groups, sealed parts and the column layout: a restoring worker reads only the chunks it
owns, a checkpoint does not re-encode a sealed batch written before, and column chunks read
back exactly."""

from __future__ import annotations

import random
from typing import Any, Dict, List

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from timelypy.dataflow.state import OperatorState, Sealed
from timelypy.errors import CheckpointError
from timelypy.order import Product
from timelypy.recovery.columns import decode_columns, encode_columns
from timelypy.recovery.format import COLUMNS, HEADER_SIZE, KEY_GROUPS, encode_keyed_chunk
from timelypy.recovery.store import CheckpointStore


def _pieces(n: int, seed: int) -> List[Any]:
    """``n`` keyed pieces shaped like a trace's: ``(hash, (key, [(val, time, diff)]))``."""
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        h = rng.getrandbits(64)
        out.append((h, (h % 1000, [(rng.randrange(100), 0, 1)])))
    return out


class CountingReads:
    """Wraps a store's location and records every chunk file read."""

    def __init__(self, files: Any):
        self.files = files
        self.read_paths: List[str] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self.files, name)

    def read(self, path: str) -> bytes:
        self.read_paths.append(path)
        return self.files.read(path)


def _publish(store: CheckpointStore, workers: List[Dict[str, OperatorState]]):
    cid = store.new_checkpoint_id()
    parts = [store.write_part(cid, w, states) for w, states in enumerate(workers)]
    return store.publish(cid, 3, len(workers), parts, {"root/1": "Arrange"})


def test_a_restore_onto_three_workers_reads_only_the_chunks_each_owns(tmp_path):
    store = CheckpointStore(str(tmp_path), chunk_pieces=64)
    old = [_pieces(3000, 1), _pieces(2500, 2)]
    manifest = _publish(store, [{"root/1": OperatorState(keyed=pieces)} for pieces in old])
    assert manifest.key_groups == KEY_GROUPS and KEY_GROUPS % 3 == 0
    index_names = {p["index"] for p in manifest.parts}
    everything = sorted(p for pieces in old for p in pieces)
    keyed_chunks = sum(part["chunks"] - 1 for part in manifest.parts)

    counting = CountingReads(store.files)
    store.files = counting
    read_per_worker = []
    for worker in range(3):
        counting.read_paths.clear()
        (first, second) = store.read_states(manifest, peers=3, index=worker)
        got = sorted(first["root/1"].keyed + second["root/1"].keyed)
        assert got == [p for p in everything if p[0] % 3 == worker]
        chunks = [p for p in counting.read_paths if p.rsplit("/", 1)[-1][:-6] not in index_names]
        read_per_worker.append(len(chunks))
        for path in chunks:  # every chunk it opened holds only pieces it owns
            data = store.files.read(path)
            hashes, _ = decode_columns(data[HEADER_SIZE:])
            assert {h % 3 for h in hashes} == {worker}, path
    # each keyed chunk is read by exactly one of the three workers
    assert sum(read_per_worker) == keyed_chunks
    assert min(read_per_worker) > 0


def test_a_worker_count_the_key_groups_do_not_decide_reads_all_and_keeps_its_own(tmp_path):
    store = CheckpointStore(str(tmp_path), chunk_pieces=64)
    pieces = _pieces(2000, 3)
    manifest = _publish(store, [{"root/1": OperatorState(keyed=pieces)}])
    assert KEY_GROUPS % 7
    counting = CountingReads(store.files)
    store.files = counting
    (states,) = store.read_states(manifest, peers=7, index=4)
    assert sorted(states["root/1"].keyed) == sorted(p for p in pieces if p[0] % 7 == 4)
    assert len(counting.read_paths) == manifest.parts[0]["chunks"]


def test_read_states_wants_both_peers_and_index(tmp_path):
    store = CheckpointStore(str(tmp_path))
    manifest = _publish(store, [{"root/1": OperatorState(keyed=_pieces(10, 4))}])
    with pytest.raises(ValueError, match="both peers and index"):
        store.read_states(manifest, peers=2)


class Batchlike:
    """An immutable part of a state; counts how often its pieces were asked for."""

    def __init__(self, pieces: List[Any]):
        self._pieces = pieces
        self.asked = 0

    def pieces(self) -> List[Any]:
        self.asked += 1
        return list(self._pieces)


def test_a_sealed_part_written_before_is_referenced_not_encoded_again(tmp_path):
    store = CheckpointStore(str(tmp_path), chunk_pieces=256)
    big, small = Batchlike(_pieces(4000, 5)), Batchlike(_pieces(30, 6))

    def state(*parts: Batchlike, version: Any = None) -> Dict[str, OperatorState]:
        return {"root/1": OperatorState(sealed=[Sealed(p, p.pieces, version) for p in parts])}

    _publish(store, [state(big)])
    assert big.asked == 1
    newer = _publish(store, [state(big, small)])
    assert (big.asked, small.asked) == (1, 1)
    part = newer.parts[0]
    assert part["sealed_reused"] == 1
    assert part["files_written"] == 2  # the small batch's chunk and the part index
    assert part["bytes_written"] < part["bytes"] / 5
    (states,) = store.read_states(newer)
    assert sorted(states["root/1"].keyed) == sorted(big._pieces + small._pieces)

    # a part changed in place (another version) is written again; a part gone is forgotten
    _publish(store, [state(big, version=2)])
    assert big.asked == 2 and small.asked == 1
    assert list(store._sealed[0]) == [id(big)]


def test_a_sealed_part_whose_chunk_was_deleted_is_written_again(tmp_path):
    store = CheckpointStore(str(tmp_path), chunk_pieces=256)
    batch = Batchlike(_pieces(500, 7))
    first = _publish(store, [{"root/1": OperatorState(sealed=[Sealed(batch, batch.pieces)])}])
    for path in store.files.list("chunks"):
        if path.rsplit("/", 1)[-1][:-6] != first.parts[0]["index"]:
            store.files.delete(path)
    second = _publish(store, [{"root/1": OperatorState(sealed=[Sealed(batch, batch.pieces)])}])
    assert batch.asked == 2 and second.parts[0]["sealed_reused"] == 0
    (states,) = store.read_states(store.latest())
    assert sorted(states["root/1"].keyed) == sorted(batch._pieces)


ints = st.integers(min_value=-(2**63), max_value=2**63 - 1)
leaves = st.sampled_from(
    [
        ints,
        st.floats(allow_nan=False),
        st.text(max_size=5),
        st.none() | st.booleans() | ints | st.binary(max_size=3),
    ]
)


@st.composite
def columns_of_one_shape(draw: Any) -> List[Any]:
    """Pieces that all have one shape (the column layout's case)."""
    leaf_a, leaf_b = draw(leaves), draw(leaves)
    n = draw(st.integers(min_value=0, max_value=30))
    shape = draw(st.sampled_from(["trace", "product", "dict", "flat"]))
    if shape == "trace":
        one = st.tuples(leaf_a, st.lists(st.tuples(leaf_b, ints, ints), max_size=3))
    elif shape == "product":
        one = st.tuples(leaf_a, st.lists(st.tuples(st.just(()), st.builds(Product, ints, ints))))
    elif shape == "dict":
        one = st.tuples(leaf_a, st.fixed_dictionaries({"state": st.lists(ints, max_size=4)}))
    else:
        one = leaf_a
    return draw(st.lists(one, min_size=n, max_size=n))


def _exact(value: Any) -> Any:
    if isinstance(value, (list, tuple)):
        return (type(value), [_exact(v) for v in value])
    if isinstance(value, dict):
        return (dict, [(k, _exact(v)) for k, v in value.items()])
    if isinstance(value, float):
        return (float, repr(value))
    return (type(value), value)


@settings(max_examples=150, deadline=None)
@given(columns_of_one_shape(), st.randoms(use_true_random=False))
def test_columns_read_back_exactly(pieces, rng):
    hashes = [rng.getrandbits(64) for _ in pieces]
    payload = encode_columns(hashes, pieces)
    if payload is None:  # mixed leaf types that msgpack alone cannot keep apart
        return
    got_hashes, got = decode_columns(payload)
    assert got_hashes == hashes
    assert _exact(got) == _exact(pieces)


@pytest.mark.parametrize(
    "pieces",
    [
        [(1, {2, 3})],  # a set
        [(2**64, 1)],  # an int beyond 64 bits
        [(1, (1, 2)), (2, (1,))],  # tuples of two lengths
        [(1, {"a": 1}), (2, {"b": 1})],  # dicts with other keys
        [(1, {1: 1})],  # a dict with a key that is not a string
    ],
)
def test_pieces_that_do_not_fit_columns_are_msgpack(pieces):
    assert encode_columns(list(range(len(pieces))), pieces) is None
    data, encoding = encode_keyed_chunk(list(range(len(pieces))), pieces, None, "op")
    assert encoding != COLUMNS


def test_a_damaged_column_chunk_is_refused_naming_the_file(tmp_path):
    store = CheckpointStore(str(tmp_path))
    manifest = _publish(store, [{"root/1": OperatorState(keyed=_pieces(50, 8))}])
    index = store._read_chunk([manifest.parts[0]["index"], manifest.parts[0]["size"]])
    name = index["operators"]["root/1"]["keyed"][0][0]
    path = f"chunks/{name[:2]}/{name}.chunk"
    data = bytearray(store.files.read(path))
    data[-3] ^= 0xFF
    store.files.put(path, bytes(data))
    with pytest.raises(CheckpointError, match=name) as caught:
        store.read_states(manifest)
    assert caught.value.path == path and "corrupt" in caught.value.reason
