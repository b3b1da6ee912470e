"""The checkpoint store at a URL: fsspec (``memory://``, ``file://``) and ``pyarrow.fs``."""

from __future__ import annotations

import secrets

import pytest

from timelypy.dataflow.state import OperatorState
from timelypy.errors import CheckpointError
from timelypy.order import Product
from timelypy.recovery.locations import ArrowLocation, FsspecLocation, LocalLocation
from timelypy.recovery.store import CheckpointStore


def _states(salt: str):
    return [
        {"root/1": OperatorState(keyed=[(i, (i, salt)) for i in range(50)], shared=[salt])},
        {"root/1": OperatorState(keyed=[(i, (i, salt)) for i in range(50, 80)])},
    ]


def _checkpoint(store: CheckpointStore, salt: str, time):
    cid = store.new_checkpoint_id()
    parts = [store.write_part(cid, w, s) for w, s in enumerate(_states(salt))]
    return store.publish(cid, time, 2, parts, {"root/1": "Reduce r"}, {"salt": salt}), parts


def _exercise(url: str) -> None:
    """Write three checkpoints with keep=2, damage the newest, and fall back to the one before."""
    store = CheckpointStore(url, keep=2)
    assert store.latest() is None
    _checkpoint(store, "a", Product(1, 0))
    second, _ = _checkpoint(store, "b", Product(2, 0))
    third, parts = _checkpoint(CheckpointStore(url, keep=2), "c", Product(3, 0))
    assert store.checkpoints() == [third.checkpoint_id, second.checkpoint_id]
    latest = store.latest()
    assert (latest.checkpoint_id, latest.time, latest.extra) == (
        third.checkpoint_id,
        Product(3, 0),
        {"salt": "c"},
    )
    assert [s["root/1"].keyed for s in store.read_states(latest)] == [
        s["root/1"].keyed for s in _states("c")
    ]
    index = f"chunks/{parts[1]['index'][:2]}/{parts[1]['index']}.chunk"
    store.files.put(index, store.files.read(index)[:-1])
    with pytest.raises(CheckpointError, match="truncated") as info:
        store.read_states(latest)
    assert info.value.path == index
    assert store.latest().checkpoint_id == second.checkpoint_id
    manifest, states = store.load_latest()
    assert manifest.checkpoint_id == second.checkpoint_id and states[0]["root/1"].shared == ["b"]


def test_a_local_directory_is_the_default(tmp_path):
    assert isinstance(CheckpointStore(str(tmp_path)).files, LocalLocation)
    _exercise(str(tmp_path))


def test_an_fsspec_memory_url():
    pytest.importorskip("fsspec")
    url = f"memory://timelypy-test-{secrets.token_hex(4)}/job"
    assert isinstance(CheckpointStore(url).files, FsspecLocation)
    _exercise(url)


def test_an_fsspec_file_url(tmp_path):
    pytest.importorskip("fsspec")
    _exercise(f"file://{tmp_path}/job")
    assert list((tmp_path / "job" / "manifests").glob("*.json"))


def test_a_pyarrow_fs_url(tmp_path, monkeypatch):
    pytest.importorskip("pyarrow.fs")
    store = CheckpointStore(str(tmp_path))
    store.files = ArrowLocation(f"file://{tmp_path}/arrow")
    assert store.files.list("manifests") == [] and store.files.size("nothing") is None
    monkeypatch.setattr("timelypy.recovery.store.open_location", ArrowLocation)
    _exercise(f"file://{tmp_path}/arrow")
    assert list((tmp_path / "arrow" / "manifests").glob("*.json"))


def test_a_local_location_is_private_whatever_the_umask(tmp_path):
    """Checkpoints hold the job's data: the directories the store creates are 0o700 and its
    files 0o600 even under a permissive umask; a directory that exists keeps its mode."""
    import os
    import stat

    old = os.umask(0o000)
    try:
        root = tmp_path / "deep" / "ck"
        store = CheckpointStore(str(root), keep=2)
        _checkpoint(store, "a", Product(1, 0))
    finally:
        os.umask(old)
    for directory, _dirs, files in os.walk(tmp_path / "deep"):
        assert stat.S_IMODE(os.stat(directory).st_mode) == 0o700, directory
        for name in files:
            path = os.path.join(directory, name)
            assert stat.S_IMODE(os.stat(path).st_mode) == 0o600, path
