"""The checkpoint store: operator states in content-named chunk files, made visible by a manifest.

Layout under the store's location (a local directory, or an fsspec / ``pyarrow.fs`` URL)::

    chunks/<2 hex>/<sha256>.chunk    chunk files (see :mod:`.format`): operator state, and one
                                     part index per worker and checkpoint
    manifests/<checkpoint_id>.json   one per published checkpoint (see :mod:`.manifest`)

Writing a checkpoint (:class:`CheckpointStore`):

1. Each worker, in its own process, calls :meth:`~CheckpointStore.write_part` with its
   operators' states. Keyed pieces fall in key groups (``routing_hash % 720``, see
   :data:`~.format.KEY_GROUPS`); an operator's pieces are cut into chunks that never mix two
   classes of key groups (``key_group % 60``) and otherwise at hash boundaries, so the cuts depend
   on the keys, not on positions, and every chunk records its key groups. A keyed chunk is laid
   out column-wise when its pieces allow (:mod:`.columns`), else msgpack. The shared part is a
   chunk of its own. A chunk file is named by the SHA-256 of its content; one that already
   exists is referenced, not written again, and a sealed part the store wrote for the previous
   checkpoint (:class:`~timelypy.dataflow.state.Sealed`) is referenced without being encoded.
   Last, the worker writes its *part index* (a chunk naming, per operator, its version, piece
   count, shared chunk and keyed chunks), makes its files durable, and returns a small
   description of it to the driver.
2. The driver calls :meth:`~CheckpointStore.publish`: the manifest (the time, the parts, the
   program's fingerprint, ``extra``) is written in one atomic step. Before that the checkpoint
   does not exist: a crash at any moment leaves the previous checkpoint the latest.
3. Publishing then prunes: the manifests beyond the newest ``keep`` are deleted, then every chunk
   that no kept manifest references and that is older than the oldest kept manifest. Chunks are
   deleted only while no other checkpoint is being written (each worker leaves a marker under
   ``pending/`` while it writes its part, removed on publish; a marker older than
   ``pending_grace`` is of a writer that died), since a checkpoint in flight may reuse any chunk.

Reading: :meth:`~CheckpointStore.latest` returns the newest checkpoint whose manifest and part
indexes verify and whose chunks all exist with their recorded sizes, skipping (with a logged
warning naming the file and the reason) a newer one that is truncated, corrupt, of another format
version or unfinished. :meth:`~CheckpointStore.read_states` reads every worker's states, each
file verified (length, SHA-256, and for pickled chunks the HMAC) before it is decoded, or with
``peers`` and ``index`` only what one restoring worker owns, reading only the chunks of its key
groups where they decide it; :meth:`~CheckpointStore.load_latest` does both and falls back past
a checkpoint whose chunks fail. Every refusal is a :class:`~timelypy.errors.CheckpointError`
naming the file and the reason.
"""

from __future__ import annotations

import gc
import logging
import re
import secrets
import time as _time
from contextlib import contextmanager
from typing import Any, Dict, Iterable, Iterator, List, Optional, Sequence, Set, Tuple

from ..dataflow.state import OperatorState, Sealed
from ..errors import CheckpointError
from .format import (
    KEY_GROUP_CLASSES,
    KEY_GROUPS,
    content_name,
    decode_chunk,
    encode_chunk,
    encode_keyed_chunk,
    read_header,
)
from .locations import Location, open_location
from .manifest import Manifest

__all__ = ["CheckpointStore", "Manifest", "CHUNK_PIECES"]

log = logging.getLogger(__name__)

CHUNK_PIECES = 4096
"""The mean number of keyed pieces in a chunk (a chunk holds at most 8 times as many)."""
_MIX = 0x9E3779B97F4A7C15
_MASK = (1 << 64) - 1
_ID = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9_.-]*")


@contextmanager
def _no_gc() -> Iterator[None]:
    """No garbage collection meanwhile: encoding or decoding a state makes millions of
    containers and frees few, so the generational collector would only rescan them."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _checked_id(checkpoint_id: str) -> str:
    """``checkpoint_id`` when it is a plain file name (no directory, no dot first)."""
    if not isinstance(checkpoint_id, str) or not _ID.fullmatch(checkpoint_id):
        raise ValueError(
            f"checkpoint id {checkpoint_id!r}: letters, digits, '-', '_' and '.' only, "
            "not starting with '.'"
        )
    return checkpoint_id


def _chunk_path(name: str) -> str:
    return f"chunks/{name[:2]}/{name}.chunk"


def _cut_keyed(keyed: List[Tuple[int, Any]], target: int) -> List[List[Tuple[int, Any]]]:
    """The pieces in chunks: at most ``target`` pieces stay one chunk; more are sorted by key
    group class, key group and routing hash (stably) and cut at every change of class (so a
    chunk's key groups have one owner for every worker count dividing
    :data:`~.format.KEY_GROUP_CLASSES`), after a hash whose mix falls on a boundary (about one
    in ``target``: the cuts depend on the keys, not on positions), never between two pieces of
    one hash, and at the latest after ``8 * target`` pieces."""
    n = len(keyed)
    if n <= target:
        return [sorted(keyed, key=_first)] if keyed else []
    groups, classes = KEY_GROUPS, KEY_GROUP_CLASSES
    # (the class h % groups % classes is h % classes: classes divides groups)
    keys = [(h % classes) << 74 | (h % groups) << 64 | h for h, _ in keyed]
    order = sorted(range(n), key=keys.__getitem__)
    pieces = [keyed[i] for i in order]
    keys = [keys[i] for i in order]
    cuts = [
        i + 1
        for i, (k, after) in enumerate(zip(keys, keys[1:]))
        if k != after
        and (k >> 74 != after >> 74 or (((k & _MASK) * _MIX & _MASK) >> 32) % target == 0)
    ]
    cuts.append(n)
    chunks: List[List[Tuple[int, Any]]] = []
    start = 0
    for end in cuts:
        while end - start > 8 * target:  # a long run without a boundary
            cut = start + 8 * target
            while cut < end and keys[cut] == keys[cut - 1]:
                cut += 1
            chunks.append(pieces[start:cut])
            start = cut
        if end > start:
            chunks.append(pieces[start:end])
            start = end
    return chunks


def _cut_by_class(keyed: List[Tuple[int, Any]], target: int) -> List[List[Tuple[int, Any]]]:
    """The pieces of a sealed part in chunks: at most ``target`` pieces stay one chunk; more
    are split by key group class, in chunks of at most ``2 * target``. No sort and no
    content-defined cuts: a sealed part is encoded once, so no later checkpoint could share
    its chunks."""
    if len(keyed) <= target:
        return [keyed] if keyed else []
    classes = KEY_GROUP_CLASSES
    buckets: List[List[Tuple[int, Any]]] = [[] for _ in range(classes)]
    for piece in keyed:
        buckets[piece[0] % classes].append(piece)
    step = 2 * target
    return [b[start : start + step] for b in buckets for start in range(0, len(b), step)]


def _first(piece: Tuple[int, Any]) -> int:
    return piece[0]


def _chunk_groups(hashes: Sequence[int]) -> Any:
    """The key groups of ``hashes``: their sorted list when few, else a bitmap (bit ``g`` of
    the little-endian integer in ``KEY_GROUPS / 8`` bytes)."""
    groups = sorted(set(map(KEY_GROUPS.__rmod__, hashes)))
    if len(groups) <= 24:
        return groups
    bits = 0
    for g in groups:
        bits |= 1 << g
    return bits.to_bytes(KEY_GROUPS // 8, "little")


def _group_bits(groups: Any) -> int:
    """A chunk's key groups (see :func:`_chunk_groups`) as an integer bitmap."""
    if type(groups) is bytes:
        return int.from_bytes(groups, "little")
    bits = 0
    for g in groups:
        bits |= 1 << g
    return bits


def _owned_groups(key_groups: int, peers: int, index: int) -> Optional[int]:
    """The bitmap of the key groups worker ``index`` of ``peers`` owns, or None when the key
    group does not decide the owner (``peers`` does not divide ``key_groups``)."""
    if peers <= 1 or key_groups % peers:
        return None
    bits = 0
    for g in range(index, key_groups, peers):
        bits |= 1 << g
    return bits


class CheckpointStore:
    """Checkpoints of one job at ``location``: a local directory (the default) or a URL (fsspec
    when installed, else ``pyarrow.fs``; imported only then).

    ``keep``: how many published checkpoints to keep (older ones and the chunks only they use
    are deleted after each publish). ``signing_key``: the key pickled chunks are signed and
    checked with (required to write or read state msgpack cannot carry; see :mod:`.format`).
    ``chunk_pieces``: the mean number of keyed pieces per chunk file. ``pending_grace``: after
    how many seconds an unpublished checkpoint's writer is taken for dead (see :meth:`prune`).
    """

    def __init__(
        self,
        location: str,
        keep: int = 3,
        signing_key: Optional[bytes] = None,
        *,
        chunk_pieces: int = CHUNK_PIECES,
        pending_grace: float = 3600.0,
    ):
        if keep < 1:
            raise ValueError(f"CheckpointStore keep={keep!r}: keep at least one checkpoint")
        if signing_key is not None and not isinstance(signing_key, bytes):
            raise TypeError(f"signing_key must be bytes, not {type(signing_key).__name__}")
        self.location = location
        self.keep = keep
        self.signing_key = signing_key
        self.chunk_pieces = max(1, chunk_pieces)
        self.pending_grace = pending_grace
        self.files: Location = open_location(location)
        # per worker: id(sealed token) -> (token, its chunk references, its piece count, its
        # version)
        self._sealed: Dict[int, Dict[int, Tuple[Any, List[List[Any]], int, Any]]] = {}

    def __repr__(self) -> str:
        return f"CheckpointStore({self.files.url!r}, keep={self.keep})"

    def __getstate__(self) -> Dict[str, Any]:
        # travels to worker processes / actors as its settings; each opens its own location
        return {
            "location": self.location,
            "keep": self.keep,
            "signing_key": self.signing_key,
            "chunk_pieces": self.chunk_pieces,
            "pending_grace": self.pending_grace,
        }

    def __setstate__(self, state: Dict[str, Any]) -> None:
        self.__init__(  # type: ignore[misc]  # rebuilding from the settings __getstate__ kept
            state["location"],
            state["keep"],
            state["signing_key"],
            chunk_pieces=state["chunk_pieces"],
            pending_grace=state["pending_grace"],
        )

    def new_checkpoint_id(self) -> str:
        """A fresh id; ids sort in the order they were made."""
        return f"{_time.time_ns():020d}-{secrets.token_hex(3)}"

    # -- writing (in the workers)
    def _put_chunk(self, value: Any, what: str, counts: Dict[str, int]) -> List[Any]:
        """Write ``value`` as a chunk unless an identical one exists; its reference
        ``[name, size]``."""
        data, _encoding = encode_chunk(value, self.signing_key, what)
        return self._put_data(data, counts)

    def _put_data(self, data: bytes, counts: Dict[str, int]) -> List[Any]:
        name = content_name(data)
        path = _chunk_path(name)
        if self.files.size(path) != len(data):  # else an earlier checkpoint wrote it
            self.files.put(path, data)
            counts["files_written"] += 1
            counts["bytes_written"] += len(data)
        counts["chunks"] += 1
        counts["bytes"] += len(data)
        return [name, len(data)]

    def _put_keyed(
        self,
        keyed: List[Tuple[int, Any]],
        what: str,
        counts: Dict[str, int],
        sealed: bool = False,
    ) -> List[List[Any]]:
        """Write keyed pieces as chunks (see :func:`_cut_keyed`, and :func:`_cut_by_class`
        for a sealed part); their references ``[name, size, key groups]``."""
        refs = []
        cut = _cut_by_class if sealed else _cut_keyed
        for chunk in cut(keyed, self.chunk_pieces):
            hashes, pieces = zip(*chunk)
            data, _ = encode_keyed_chunk(hashes, pieces, self.signing_key, what)
            refs.append([*self._put_data(data, counts), _chunk_groups(hashes)])
        return refs

    def _put_sealed(
        self,
        sealed: List[Sealed],
        written: Dict[int, Tuple[Any, List[List[Any]], int, Any]],
        kept: Dict[int, Tuple[Any, List[List[Any]], int, Any]],
        what: str,
        counts: Dict[str, int],
    ) -> Tuple[List[List[Any]], int]:
        """The references of the sealed parts' chunks and their piece count: a part this store
        wrote before (the same object, its chunks still there) is referenced, not encoded."""
        refs: List[List[Any]] = []
        pieces = 0
        for part in sealed:
            hit = written.get(id(part.token))
            if (
                hit is not None
                and hit[0] is part.token
                and hit[3] == part.version
                and all(self.files.size(_chunk_path(r[0])) == r[1] for r in hit[1])
            ):
                for ref in hit[1]:
                    counts["chunks"] += 1
                    counts["bytes"] += ref[1]
                counts["sealed_reused"] += 1
            else:
                keyed = part.pieces()
                refs_made = self._put_keyed(keyed, what, counts, sealed=True)
                hit = (part.token, refs_made, len(keyed), part.version)
            kept[id(part.token)] = hit
            refs.extend(hit[1])
            pieces += hit[2]
        return refs, pieces

    def write_part(
        self, checkpoint_id: str, worker_index: int, states: Dict[str, OperatorState]
    ) -> Dict[str, Any]:
        """Write one worker's operator states for ``checkpoint_id``; the description of the
        part for the manifest (its index file, sizes, and what was written anew)."""
        with _no_gc():
            return self._write_part(checkpoint_id, worker_index, states)

    def _write_part(
        self, checkpoint_id: str, worker_index: int, states: Dict[str, OperatorState]
    ) -> Dict[str, Any]:
        # the marker tells a concurrent prune that chunks are being written (or reused)
        self.files.put(f"pending/{_checked_id(checkpoint_id)}.{worker_index}", b"")
        counts = {"chunks": 0, "files_written": 0, "bytes_written": 0, "bytes": 0}
        counts["sealed_reused"] = 0
        written = self._sealed.get(worker_index, {})
        kept: Dict[int, Tuple[Any, List[List[Any]], int, Any]] = {}
        operators: Dict[str, Any] = {}
        for op_id in sorted(states):
            state = states[op_id]
            what = f"operator {op_id!r} on worker {worker_index}"
            keyed_refs = self._put_keyed(list(state.keyed), what, counts)
            sealed_refs, sealed_pieces = self._put_sealed(state.sealed, written, kept, what, counts)
            shared = None
            if state.shared is not None:
                shared = self._put_chunk({"shared": state.shared}, what, counts)
            operators[op_id] = {
                "version": state.version,
                "pieces": len(state.keyed) + sealed_pieces,
                "keyed": keyed_refs + sealed_refs,
                "shared": shared,
            }
        self._sealed[worker_index] = kept  # what is not in this checkpoint is forgotten
        index = {
            "checkpoint_id": checkpoint_id,
            "worker": worker_index,
            "key_groups": KEY_GROUPS,
            "operators": operators,
        }
        ref = self._put_chunk(index, f"the part index of worker {worker_index}", counts)
        self.files.sync()  # every file of the part is durable before the driver publishes it
        return {"worker": worker_index, "index": ref[0], "size": ref[1], **counts}

    # -- publishing (on the driver)
    def publish(
        self,
        checkpoint_id: str,
        time: Any,
        peers: int,
        parts: List[Dict[str, Any]],
        fingerprint: Dict[str, str],
        extra: Optional[Dict[str, Any]] = None,
    ) -> Manifest:
        """Make the checkpoint visible: check its parts are all there, write its manifest in one
        atomic step, then prune to the newest ``keep``."""
        _checked_id(checkpoint_id)
        parts = sorted(parts, key=lambda p: p["worker"])
        manifest = Manifest(
            checkpoint_id=checkpoint_id,
            time=time,
            peers=peers,
            fingerprint=dict(fingerprint),
            extra=dict(extra or {}),
            created=_time.time(),
            parts=parts,
            path=f"manifests/{checkpoint_id}.json",
        )
        self._check_complete(manifest)
        self.files.put_atomic(manifest.path, manifest.to_bytes())
        for part in parts:
            self.files.delete(f"pending/{checkpoint_id}.{part['worker']}")
        log.info(
            "checkpoint %s published at time %r: %d workers, %d bytes written of %d",
            checkpoint_id,
            time,
            peers,
            sum(p.get("bytes_written", 0) for p in parts),
            sum(p.get("bytes", 0) for p in parts),
        )
        self.prune()
        return manifest

    def _check_complete(self, manifest: Manifest) -> None:
        """Refuse an unfinished checkpoint: a worker's part missing, or its index file."""
        workers = [p.get("worker") for p in manifest.parts]
        if workers != list(range(manifest.peers)):
            missing = sorted(set(range(manifest.peers)) - set(workers))
            reason = (
                f"unfinished: parts of {manifest.peers} workers expected, found workers "
                f"{workers} (missing {missing})"
            )
            raise CheckpointError(f"checkpoint {manifest.path}: {reason}", manifest.path, reason)
        for part in manifest.parts:
            path = _chunk_path(part["index"])
            size = self.files.size(path)
            if size != part["size"]:
                reason = f"unfinished or damaged: the part index of worker {part['worker']} is " + (
                    "missing" if size is None else f"{size} bytes, {part['size']} expected"
                )
                raise CheckpointError(f"checkpoint file {path}: {reason}", path, reason)

    # -- reading
    def _manifest_names(self) -> List[str]:
        names = [n for n in self.files.list("manifests") if n.endswith(".json")]
        return sorted(names, reverse=True)

    def manifest(self, checkpoint_id: str) -> Manifest:
        """The manifest of ``checkpoint_id``, checked (format, checksum, complete parts); a
        checkpoint without a manifest is unfinished and refused."""
        path = f"manifests/{_checked_id(checkpoint_id)}.json"
        try:
            data = self.files.read(path)
        except FileNotFoundError:
            reason = (
                "unfinished: no manifest (the checkpoint is still being written, or its "
                "writer stopped before publishing it)"
            )
            raise CheckpointError(f"checkpoint {path}: {reason}", path, reason) from None
        manifest = Manifest.from_bytes(data, path)
        self._check_complete(manifest)
        return manifest

    def checkpoints(self) -> List[str]:
        """The ids of the published checkpoints (valid or not), newest first."""
        return [n.rsplit("/", 1)[-1][: -len(".json")] for n in self._manifest_names()]

    def _read_chunk(self, ref: List[Any], cache: Optional[Dict[str, Any]] = None) -> Any:
        name, size = ref[0], ref[1]
        if cache is not None and name in cache:
            return cache[name]
        path = _chunk_path(name)
        try:
            data = self.files.read(path)
        except FileNotFoundError:
            reason = "missing (deleted, or never written)"
            raise CheckpointError(f"checkpoint file {path}: {reason}", path, reason) from None
        if len(data) != size:
            reason = f"truncated or altered: {len(data)} bytes, the checkpoint recorded {size}"
            raise CheckpointError(f"checkpoint file {path}: {reason}", path, reason)
        read_header(data, path)  # a truncated file, another version: say so first
        if content_name(data) != name:
            reason = "corrupt: its SHA-256 differs from its name"
            raise CheckpointError(f"checkpoint file {path}: {reason}", path, reason)
        value = decode_chunk(data, path, self.signing_key, checked=True)
        if cache is not None:
            cache[name] = value
        return value

    def _part_indexes(self, manifest: Manifest) -> List[Dict[str, Any]]:
        return [self._read_chunk([p["index"], p["size"]]) for p in manifest.parts]

    def _verify(self, manifest: Manifest) -> None:
        """The manifest's part indexes verify and every chunk exists with its recorded size."""
        for index in self._part_indexes(manifest):
            for entry in index["operators"].values():
                refs = entry["keyed"] + ([entry["shared"]] if entry["shared"] else [])
                for name, size, *_groups in refs:
                    path = _chunk_path(name)
                    found = self.files.size(path)
                    if found != size:
                        reason = (
                            "missing"
                            if found is None
                            else f"truncated or altered: {found} bytes, {size} recorded"
                        )
                        raise CheckpointError(f"checkpoint file {path}: {reason}", path, reason)

    def _valid_manifests(self, verify: bool) -> Iterable[Manifest]:
        """The published checkpoints newest first, skipping (with a warning) invalid ones."""
        for name in self._manifest_names():
            try:
                manifest = self.manifest(name.rsplit("/", 1)[-1][: -len(".json")])
                if verify:
                    self._verify(manifest)
            except CheckpointError as exc:
                log.warning("checkpoint store %s: skipping %s: %s", self.files.url, name, exc)
                continue
            yield manifest

    def latest(self) -> Optional[Manifest]:
        """The newest valid checkpoint, or None when there is none."""
        return next(iter(self._valid_manifests(verify=True)), None)

    def read_states(
        self, manifest: Manifest, peers: Optional[int] = None, index: Optional[int] = None
    ) -> List[Dict[str, OperatorState]]:
        """Every worker's operator states of ``manifest``, in worker order; each file verified.

        With ``peers`` and ``index``: only what worker ``index`` of ``peers`` owns (the keyed
        pieces whose ``routing_hash % peers == index``; every shared part), reading only the
        chunks that hold key groups it owns when the key group decides the owner (``peers``
        divides :data:`~.format.KEY_GROUPS`), and every chunk otherwise."""
        if (peers is None) != (index is None):
            raise ValueError("read_states: give both peers and index, or neither")
        with _no_gc():
            return self._read_states(manifest, peers, index)

    def _read_states(
        self, manifest: Manifest, peers: Optional[int], index: Optional[int]
    ) -> List[Dict[str, OperatorState]]:
        filtering = peers is not None and peers > 1
        cache: Dict[str, Any] = {}
        workers = []
        for part_index in self._part_indexes(manifest):
            owned = None
            if filtering:
                assert peers is not None and index is not None
                owned = _owned_groups(part_index.get("key_groups", 0), peers, index)
            states = {}
            for op_id, entry in part_index["operators"].items():
                keyed: List[Tuple[int, Any]] = []
                for ref in entry["keyed"]:
                    if owned is not None and not owned & _group_bits(ref[2]):
                        continue
                    chunk = self._read_chunk(ref, cache)
                    if peers is not None and peers > 1:
                        keyed.extend(
                            p for p in zip(chunk["h"], chunk["p"]) if p[0] % peers == index
                        )
                    else:
                        keyed.extend(zip(chunk["h"], chunk["p"]))
                shared = None
                if entry["shared"] is not None:
                    shared = self._read_chunk(entry["shared"], cache)["shared"]
                states[op_id] = OperatorState(keyed=keyed, shared=shared, version=entry["version"])
            workers.append(states)
        return workers

    def load_latest(self) -> Optional[Tuple[Manifest, List[Dict[str, OperatorState]]]]:
        """The newest checkpoint whose every file reads and verifies, and its states; a newer
        one that fails is skipped with a logged warning. None when there is none."""
        for manifest in self._valid_manifests(verify=False):
            try:
                return manifest, self.read_states(manifest)
            except CheckpointError as exc:
                log.warning(
                    "checkpoint store %s: skipping %s: %s", self.files.url, manifest.path, exc
                )
        return None

    # -- pruning
    def _writing(self) -> bool:
        """Whether a checkpoint is being written: a worker's pending marker younger than
        ``pending_grace`` (older ones are of writers that died, and are removed)."""
        writing = False
        now = _time.time()
        for path in self.files.list("pending"):
            if now - self.files.mtime(path) < self.pending_grace:
                writing = True
            else:
                self.files.delete(path)
        return writing

    def prune(self) -> None:
        """Delete the manifests beyond the newest ``keep`` valid ones, then every chunk no kept
        checkpoint references that is older than the oldest kept manifest; chunks only when no
        other checkpoint is being written (it may reuse any chunk)."""
        kept: List[Manifest] = []
        referenced: Set[str] = set()
        names = self._manifest_names()
        for position, name in enumerate(names):
            if len(kept) == self.keep:
                for old in names[position:]:
                    self.files.delete(old)
                break
            try:
                manifest = self.manifest(name.rsplit("/", 1)[-1][: -len(".json")])
                indexes = self._part_indexes(manifest)
            except CheckpointError:
                continue  # an invalid manifest is skipped by readers, and not counted
            kept.append(manifest)
            referenced |= _referenced_chunks(manifest, indexes)
        if not kept or self._writing():
            return
        cutoff = min(self.files.mtime(m.path) for m in kept)
        for path in self.files.list("manifests"):  # a manifest half written by a crash
            if not path.endswith(".json") and self.files.mtime(path) < cutoff:
                self.files.delete(path)
        for path in self.files.list("chunks"):
            stem = path.rsplit("/", 1)[-1].split(".", 1)[0]
            if stem not in referenced and self.files.mtime(path) < cutoff:
                self.files.delete(path)


def _referenced_chunks(manifest: Manifest, indexes: List[Dict[str, Any]]) -> Set[str]:
    names = {p["index"] for p in manifest.parts}
    for index in indexes:
        for entry in index["operators"].values():
            names.update(ref[0] for ref in entry["keyed"])
            if entry["shared"]:
                names.add(entry["shared"][0])
    return names
