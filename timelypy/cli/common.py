"""What the commands share: running a program file as ``__main__``, the run environment, paths.

The CLI is the user interface, so it may print; the library below it never does.
"""

from __future__ import annotations

import ast
import contextlib
import os
import pathlib
import runpy
import sys
from typing import Dict, Iterator, List, Optional, Sequence

import typer

from ..workers.defaults import BACKEND_ENV, RAY_ADDRESS_ENV, WORKERS_ENV

__all__ = ["BACKENDS", "run_environment", "run_program", "repository_dir", "bundled_dir",
           "first_doc_line", "fail", "scripts_in"]

BACKENDS = ("inline", "processes", "ray")
"""The backends the commands offer (``--backend``)."""


def fail(message: str, code: int = 2) -> "typer.Exit":
    """Print ``message`` on stderr as an error and return the :class:`typer.Exit` to raise."""
    typer.secho(f"Error: {message}", err=True, fg=typer.colors.RED)
    return typer.Exit(code)


@contextlib.contextmanager
def run_environment(workers: Optional[int], backend: Optional[str],
                    ray_address: Optional[str] = None) -> Iterator[None]:
    """Set ``TIMELYPY_WORKERS`` / ``TIMELYPY_BACKEND`` / ``TIMELYPY_RAY_ADDRESS`` for the block
    (those given), so that ``execute`` and ``open_session`` calls that leave ``workers`` and
    ``backend`` unset use them; the previous values come back afterwards."""
    if workers is not None and workers < 1:
        raise fail(f"--workers must be at least 1, got {workers}")
    if backend is not None and backend not in BACKENDS:
        raise fail(f"--backend must be one of {', '.join(BACKENDS)}, got {backend!r}")
    wanted = {WORKERS_ENV: None if workers is None else str(workers), BACKEND_ENV: backend,
              RAY_ADDRESS_ENV: ray_address}
    saved: Dict[str, Optional[str]] = {k: os.environ.get(k) for k in wanted}
    for key, value in wanted.items():
        if value is not None:
            os.environ[key] = value
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def run_program(program: pathlib.Path, args: Sequence[str]) -> None:
    """Run ``program`` as ``__main__`` (as ``python program args...`` would): ``sys.argv`` is
    the program and its arguments, its directory is first on ``sys.path``; both come back
    afterwards. A ``SystemExit`` of the program propagates."""
    if not program.is_file():
        raise fail(f"no program file {str(program)!r}")
    argv, path = sys.argv[:], sys.path[:]
    sys.argv = [str(program), *args]
    sys.path.insert(0, str(program.resolve().parent))
    try:
        runpy.run_path(str(program), run_name="__main__")
    finally:
        sys.argv[:] = argv
        sys.path[:] = path


def repository_dir() -> pathlib.Path:
    """The directory holding the ``timelypy`` package (the repository in a source checkout or
    an editable install)."""
    return pathlib.Path(__file__).resolve().parent.parent.parent


def bundled_dir(name: str) -> pathlib.Path:
    """``examples/`` or ``benchmarks/`` next to the package; a clear error when absent (an
    installed wheel has neither)."""
    path = repository_dir() / name
    if not path.is_dir():
        raise fail(f"no {name}/ directory next to the timelypy package (looked in {path}). "
                   f"The {name} ship with the source repository: clone it and install it with "
                   f"`pip install -e .` to use this command.")
    return path


def scripts_in(directory: pathlib.Path, skip: Sequence[str] = ("common",)) -> List[pathlib.Path]:
    """The ``*.py`` scripts of ``directory``, sorted by name (helpers in ``skip`` left out)."""
    return sorted(p for p in directory.glob("*.py")
                  if p.stem not in skip and not p.stem.startswith("_"))


def first_doc_line(path: pathlib.Path) -> str:
    """The first line of a script's module docstring ("" when it has none)."""
    try:
        doc = ast.get_docstring(ast.parse(path.read_text()))
    except (OSError, SyntaxError):
        return ""
    return doc.strip().splitlines()[0] if doc else ""
