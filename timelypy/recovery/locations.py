"""Where checkpoints live: a local directory, or any fsspec / ``pyarrow.fs`` URL.

A :class:`Location` is the handful of file operations the store needs, on paths relative to the
checkpoint root. :func:`open_location` picks one: a plain path (or ``file://`` without fsspec) is
a local directory handled with ``os``; a URL (``s3://``, ``gs://``, ``memory://``, ...) goes to
fsspec when it is installed, else to ``pyarrow.fs``. Both are imported only for a URL.

``put_atomic`` is what makes a manifest visible at once: on a local directory a write to a
temporary name then ``os.replace``; on an object store a single put (readers see the whole
object or none).
"""

from __future__ import annotations

import os
import secrets
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any, List, Optional, Protocol

__all__ = ["Location", "LocalLocation", "FsspecLocation", "ArrowLocation", "open_location"]


class Location(Protocol):
    """File operations on paths relative to a checkpoint root (``"manifests/x.json"``)."""

    url: str

    def read(self, path: str) -> bytes:
        """The file's bytes; ``FileNotFoundError`` when there is none."""
        ...

    def put(self, path: str, data: bytes) -> None:
        """Write a file that is not visible before it is whole (temporary name, or one put)."""
        ...

    def put_atomic(self, path: str, data: bytes) -> None:
        """Write a file that appears at once, whole, or not at all, and is durable."""
        ...

    def sync(self) -> None:
        """Make every file :meth:`put` wrote durable (on a local disk: flushed to it)."""
        ...

    def size(self, path: str) -> Optional[int]:
        """The file's size, or None when it does not exist."""
        ...

    def mtime(self, path: str) -> float:
        """The file's modification time (seconds since the epoch)."""
        ...

    def list(self, directory: str) -> List[str]:
        """The names of the files under ``directory`` (relative to the root), recursively."""
        ...

    def delete(self, path: str) -> None:
        """Remove a file; no error when it is already gone."""
        ...


def _make_private_dirs(directory: str) -> None:
    """Create ``directory`` and its missing parents readable by this user only (0o700; a
    directory that exists keeps its mode)."""
    missing = []
    while directory and not os.path.isdir(directory):
        missing.append(directory)
        directory = os.path.dirname(directory)
    for d in reversed(missing):
        try:
            os.mkdir(d, 0o700)
        except FileExistsError:
            pass


def _create_private(path: str) -> Any:
    """A new file opened for writing, readable by this user only (0o600)."""
    return os.fdopen(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "wb")


class LocalLocation:
    """A checkpoint root in a local (or mounted shared) directory. Directories it creates are
    0o700 and files 0o600 (checkpoints hold the job's data), whatever the umask."""

    def __init__(self, root: str):
        self.root = os.path.abspath(root)
        self.url = self.root
        self._unsynced: List[str] = []

    def _path(self, path: str) -> str:
        return os.path.join(self.root, *path.split("/"))

    def read(self, path: str) -> bytes:
        with open(self._path(path), "rb") as f:
            return f.read()

    def put(self, path: str, data: bytes) -> None:
        # whole or absent (a temporary name, then a rename); durable at the next sync(), which
        # flushes the files together rather than one fsync after each
        target = self._path(path)
        tmp = f"{target}.tmp-{secrets.token_hex(4)}"
        try:
            f = _create_private(tmp)
        except FileNotFoundError:
            _make_private_dirs(os.path.dirname(target))
            f = _create_private(tmp)
        with f:
            f.write(data)
        os.replace(tmp, target)
        self._unsynced.append(target)

    def sync(self) -> None:
        paths, self._unsynced = self._unsynced, []
        if not paths:
            return
        directories = sorted({os.path.dirname(p) for p in paths})

        def flush(path: str, flags: int = os.O_RDONLY) -> None:
            try:
                fd = os.open(path, flags)
            except FileNotFoundError:  # deleted since (a prune): nothing to make durable
                return
            try:
                os.fsync(fd)
            finally:
                os.close(fd)

        # fsyncs issued together share the file system's journal commits
        with ThreadPoolExecutor(max_workers=8) as pool:
            list(pool.map(flush, paths))
            list(pool.map(flush, directories))

    def put_atomic(self, path: str, data: bytes) -> None:
        target = self._path(path)
        _make_private_dirs(os.path.dirname(target))
        tmp = f"{target}.tmp-{secrets.token_hex(4)}"
        with _create_private(tmp) as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, target)

    def size(self, path: str) -> Optional[int]:
        try:
            return os.stat(self._path(path)).st_size
        except FileNotFoundError:
            return None

    def mtime(self, path: str) -> float:
        return os.stat(self._path(path)).st_mtime

    def list(self, directory: str) -> List[str]:
        base = self._path(directory)
        found = []
        for dirpath, _dirs, files in os.walk(base):
            rel = os.path.relpath(dirpath, self.root).replace(os.sep, "/")
            found += [f"{rel}/{name}" for name in files]
        return sorted(found)

    def delete(self, path: str) -> None:
        try:
            os.remove(self._path(path))
        except FileNotFoundError:
            pass


class FsspecLocation:
    """A checkpoint root at an fsspec URL (``s3://bucket/jobs/x``, ``memory://x``, ...)."""

    def __init__(self, url: str):
        import fsspec  # type: ignore[import-untyped]  # fsspec ships no type information

        self.url = url
        self.fs, root = fsspec.core.url_to_fs(url)
        self.root = root.rstrip("/")

    def _path(self, path: str) -> str:
        return f"{self.root}/{path}"

    def read(self, path: str) -> bytes:
        return bytes(self.fs.cat_file(self._path(path)))

    def put(self, path: str, data: bytes) -> None:
        self.put_atomic(path, data)

    def sync(self) -> None:
        pass  # each put is durable when it returns

    def put_atomic(self, path: str, data: bytes) -> None:
        target = self._path(path)
        if getattr(self.fs, "protocol", None) in ("file", ("file", "local")):
            tmp = f"{target}.tmp-{secrets.token_hex(4)}"
            self.fs.makedirs(target.rsplit("/", 1)[0], exist_ok=True)
            self.fs.pipe_file(tmp, data)
            self.fs.mv(tmp, target)
        else:  # an object store: one put is atomic
            self.fs.pipe_file(target, data)

    def size(self, path: str) -> Optional[int]:
        try:
            return int(self.fs.info(self._path(path))["size"])
        except FileNotFoundError:
            return None

    def mtime(self, path: str) -> float:
        modified: Any = self.fs.modified(self._path(path))
        return float(modified.timestamp())

    def list(self, directory: str) -> List[str]:
        try:
            found = self.fs.find(self._path(directory))
        except FileNotFoundError:
            return []
        root = self.root.strip("/")
        names = []
        for path in found:
            rel = path.strip("/")
            if not root:
                names.append(rel)
            elif rel.startswith(root + "/"):
                names.append(rel[len(root) + 1 :])
        return sorted(names)

    def delete(self, path: str) -> None:
        try:
            self.fs.rm_file(self._path(path))
        except FileNotFoundError:
            pass


class ArrowLocation:
    """A checkpoint root at a ``pyarrow.fs`` URL (used when fsspec is not installed)."""

    def __init__(self, url: str):
        from pyarrow import fs

        self.url = url
        self.fs, root = fs.FileSystem.from_uri(url)
        self.root = root.rstrip("/")
        self._fs_module = fs

    def _path(self, path: str) -> str:
        return f"{self.root}/{path}"

    def read(self, path: str) -> bytes:
        with self.fs.open_input_stream(self._path(path)) as f:
            return bytes(f.read())

    def put(self, path: str, data: bytes) -> None:
        self.put_atomic(path, data)

    def sync(self) -> None:
        pass  # each put is durable when it returns

    def put_atomic(self, path: str, data: bytes) -> None:
        target = self._path(path)
        self.fs.create_dir(target.rsplit("/", 1)[0], recursive=True)
        if self.fs.type_name == "local":
            tmp = f"{target}.tmp-{secrets.token_hex(4)}"
            with self.fs.open_output_stream(tmp) as f:
                f.write(data)
            self.fs.move(tmp, target)
        else:
            with self.fs.open_output_stream(target) as f:
                f.write(data)

    def _info(self, path: str) -> Any:
        info = self.fs.get_file_info(self._path(path))
        return None if info.type == self._fs_module.FileType.NotFound else info

    def size(self, path: str) -> Optional[int]:
        info = self._info(path)
        return None if info is None else int(info.size)

    def mtime(self, path: str) -> float:
        info = self._info(path)
        if info is None or info.mtime is None:
            return time.time()
        return float(info.mtime.timestamp())

    def list(self, directory: str) -> List[str]:
        selector = self._fs_module.FileSelector(
            self._path(directory), recursive=True, allow_not_found=True
        )
        infos = self.fs.get_file_info(selector)
        files = [i.path for i in infos if i.type == self._fs_module.FileType.File]
        return sorted(p[len(self.root) + 1 :] for p in files)

    def delete(self, path: str) -> None:
        if self._info(path) is not None:
            self.fs.delete_file(self._path(path))


def open_location(location: str) -> Location:
    """The :class:`Location` of ``location``: a local directory for a plain path, else fsspec
    (when installed) or ``pyarrow.fs`` for a URL."""
    if "://" not in location:
        return LocalLocation(location)
    try:
        import fsspec  # noqa: F401
    except ImportError:
        return ArrowLocation(location)
    return FsspecLocation(location)
