"""What the commands share: running a program file as ``__main__``, the run environment, paths.

The CLI is the user interface, so it may print; the library below it never does.
"""

from __future__ import annotations

import ast
import contextlib
import importlib
import inspect
import os
import pathlib
import re
import runpy
import sys
from typing import Any, Dict, Iterable, Iterator, List, Optional, Sequence, Tuple, Type

import typer

from ..errors import did_you_mean
from ..workers.launch.defaults import BACKEND_ENV, RAY_ADDRESS_ENV, WORKERS_ENV
from .report import concise_report, full_report

__all__ = [
    "BACKENDS",
    "run_environment",
    "run_program",
    "run_target",
    "run_function",
    "repository_dir",
    "bundled_dir",
    "first_doc_line",
    "fail",
    "scripts_in",
    "suggest",
    "reporting",
    "TARGET",
]

TARGET = re.compile(r"^(?P<module>[A-Za-z_][\w.]*):(?P<function>[A-Za-z_][\w.]*)$")
"""``module:function`` (``package.module:object.method`` too), as ``timelypy run`` takes it."""

BACKENDS = ("inline", "processes", "ray")
"""The backends the commands offer (``--backend``)."""


def fail(message: str, code: int = 2) -> "typer.Exit":
    """Print ``message`` on stderr as an error and return the :class:`typer.Exit` to raise."""
    typer.secho(f"Error: {message}", err=True, fg=typer.colors.RED)
    return typer.Exit(code)


def suggest(name: Any, choices: Iterable[Any]) -> str:
    """`` (did you mean 'x'?)`` for a misspelt ``name`` among ``choices``, or ``""``."""
    hint = did_you_mean(name, choices)
    return f" ({hint})" if hint else ""


def _command_line_exits() -> Tuple[Type[BaseException], ...]:
    """The exceptions by which the command line itself exits: typer's, and click's where typer
    runs on click (typer before 0.2x uses the click package; later ones carry their own copy,
    whose exceptions derive from ``typer.TyperException``, and click may not be installed)."""
    kinds: List[Type[BaseException]] = [typer.Exit, typer.Abort]
    if hasattr(typer, "TyperException"):
        kinds.append(typer.TyperException)
    try:
        import click
    except ImportError:
        return tuple(kinds)
    return tuple(kinds + [click.exceptions.Exit, click.exceptions.Abort, click.ClickException])


_COMMAND_LINE_EXITS = _command_line_exits()


@contextlib.contextmanager
def reporting(verbose: bool) -> Iterator[None]:
    """Report an error of the user's program raised in the block: its message and the user's
    own frames (with ``verbose``: the whole traceback) on stderr, then exit with code 1.
    The CLI's own exits, ``SystemExit`` and ``KeyboardInterrupt`` pass through."""
    try:
        yield
    except _COMMAND_LINE_EXITS:
        raise
    except Exception as exc:  # noqa: BLE001 - the user's program: any error is reported
        if verbose:
            typer.echo(full_report(exc), err=True)
        else:
            headline, _, rest = concise_report(exc).partition("\n")
            typer.secho(f"Error: {headline}", err=True, fg=typer.colors.RED)
            typer.echo(rest, err=True)
        raise typer.Exit(1) from None


@contextlib.contextmanager
def run_environment(
    workers: Optional[int], backend: Optional[str], ray_address: Optional[str] = None
) -> Iterator[None]:
    """Set ``TIMELYPY_WORKERS`` / ``TIMELYPY_BACKEND`` / ``TIMELYPY_RAY_ADDRESS`` for the block
    (those given), so that ``execute`` and ``open_session`` calls that leave ``workers`` and
    ``backend`` unset use them; the previous values come back afterwards."""
    if workers is not None and workers < 1:
        raise fail(f"--workers must be at least 1, got {workers}")
    if backend is not None and backend not in BACKENDS:
        raise fail(
            f"--backend must be one of {', '.join(BACKENDS)}, got {backend!r}"
            + suggest(backend, BACKENDS)
        )
    wanted = {
        WORKERS_ENV: None if workers is None else str(workers),
        BACKEND_ENV: backend,
        RAY_ADDRESS_ENV: ray_address,
    }
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
        parent = program.parent if program.parent.is_dir() else None
        nearby = [p.name for p in parent.glob("*.py")] if parent else []
        raise fail(f"no program file {str(program)!r}" + suggest(program.name, nearby))
    argv, path = sys.argv[:], sys.path[:]
    sys.argv = [str(program), *args]
    sys.path.insert(0, str(program.resolve().parent))
    try:
        runpy.run_path(str(program.resolve()), run_name="__main__")  # frames name the file fully
    finally:
        sys.argv[:] = argv
        sys.path[:] = path


def run_target(target: str, args: Sequence[str]) -> Any:
    """Run ``target``: a program file (as ``__main__``, :func:`run_program`) or
    ``module:function`` (:func:`run_function`)."""
    if pathlib.Path(target).is_file() or not TARGET.match(target):
        return run_program(pathlib.Path(target), args)
    return run_function(target, args)


def _modules_here(directory: pathlib.Path) -> List[str]:
    """The modules and packages importable from ``directory``."""
    try:
        return sorted(
            p.stem if p.suffix == ".py" else p.name
            for p in directory.iterdir()
            if (p.suffix == ".py" and p.stem.isidentifier())
            or (p.is_dir() and (p / "__init__.py").is_file())
        )
    except OSError:
        return []


def _import(module: str) -> Any:
    """Import ``module`` (from the current directory or ``sys.path``); a clear error, with a
    suggestion, when there is no such module."""
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as exc:
        if exc.name is None or not (module == exc.name or module.startswith(exc.name + ".")):
            raise  # the module exists, but an import inside it failed: the user's error
        top = exc.name.split(".")[0]
        raise fail(
            f"no module named {exc.name!r} in the current directory "
            f"({os.getcwd()}) or on sys.path" + suggest(top, _modules_here(pathlib.Path.cwd()))
        ) from None


def _attribute(module: Any, module_name: str, dotted: str) -> Any:
    """``module.<dotted>``; a clear error, with a suggestion, for a misspelt name."""
    obj = module
    for part in dotted.split("."):
        if not hasattr(obj, part):
            names = [n for n in dir(obj) if not n.startswith("_")]
            owner = f"module {module_name!r}" if obj is module else repr(obj)
            raise fail(f"{owner} has no {part!r}" + suggest(part, names))
        obj = getattr(obj, part)
    return obj


def _required_positional(fn: Any) -> Optional[int]:
    """How many arguments ``fn`` needs (None: its signature cannot be read)."""
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return None
    return sum(
        1
        for p in params
        if p.default is p.empty and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
    )


def run_function(target: str, args: Sequence[str]) -> Any:
    """Run ``module:function`` (as ``python -m bytewax.run module:flow``): import the module
    from the current directory or ``sys.path``, then call ``function()`` - a program's main -
    or, when it takes one argument, run it as a ``build(worker)`` with ``execute`` and print
    every worker's result that is not None. ``sys.argv`` is ``[target, *args]`` meanwhile."""
    from ..workers.launch.execute import execute

    match = TARGET.match(target)
    if match is None:
        raise fail(f"{target!r} is not module:function")
    argv, path = sys.argv[:], sys.path[:]
    sys.argv = [target, *args]
    if os.getcwd() not in sys.path and "" not in sys.path:
        sys.path.insert(0, os.getcwd())  # as `python -m` does
    try:
        module = _import(match["module"])
        fn = _attribute(module, match["module"], match["function"])
        if not callable(fn):
            raise fail(f"{target} is a {type(fn).__name__}, not a function")
        needs = _required_positional(fn)
        if needs == 1:
            for i, result in enumerate(execute(fn)):
                if result is not None:
                    typer.echo(f"worker {i}: {result!r}")
            return None
        if needs not in (0, None):
            raise fail(
                f"{target} takes {needs} arguments: `timelypy run module:function` "
                f"calls function() (a main) or function(worker) (a build)"
            )
        return fn()
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
        raise fail(
            f"no {name}/ directory next to the timelypy package (looked in {path}). "
            f"The {name} ship with the source repository: clone it and install it with "
            f"`pip install -e .` to use this command."
        )
    return path


def scripts_in(directory: pathlib.Path, skip: Sequence[str] = ("common",)) -> List[pathlib.Path]:
    """The ``*.py`` scripts of ``directory``, sorted by name (helpers in ``skip`` left out)."""
    return sorted(
        p for p in directory.glob("*.py") if p.stem not in skip and not p.stem.startswith("_")
    )


def first_doc_line(path: pathlib.Path) -> str:
    """The first line of a script's module docstring ("" when it has none)."""
    try:
        doc = ast.get_docstring(ast.parse(path.read_text()))
    except (OSError, SyntaxError):
        return ""
    return doc.strip().splitlines()[0] if doc else ""
