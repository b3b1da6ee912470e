"""Logging: no print in the library, loggers named after their modules under ``timelypy``, a
NullHandler on the package logger, and INFO / DEBUG lines at start-up and shutdown."""

from __future__ import annotations

import ast
import logging
import pathlib

import timelypy as tp

PACKAGE = pathlib.Path(tp.__file__).resolve().parent
LAYER_LOGGERS = (
    "timelypy.progress",
    "timelypy.communication",
    "timelypy.dataflow",
    "timelypy.differential",
    "timelypy.workers",
    "timelypy.connectors",
)


def _library_modules():
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE)
        if rel.parts[0].startswith("cli") or rel.name == "__main__.py":
            continue  # the command line prints on purpose
        yield path


def test_no_print_in_the_library():
    calls = []
    for path in _library_modules():
        for node in ast.walk(ast.parse(path.read_text())):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Name)
                and node.func.id == "print"
            ):
                calls.append(f"{path.relative_to(PACKAGE.parent)}:{node.lineno}")
    assert not calls, "print() in the library (use logging): " + ", ".join(calls)


def test_loggers_follow_the_package():
    """``logging.getLogger(__name__)`` everywhere, or a literal name under ``timelypy``."""
    bad = []
    for path in _library_modules():
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        module = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        for node in ast.walk(ast.parse(path.read_text())):
            if not (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr == "getLogger"
                and node.args
            ):
                continue
            arg = node.args[0]
            if isinstance(arg, ast.Name) and arg.id == "__name__":
                continue
            if isinstance(arg, ast.Constant) and arg.value in (module, "timelypy.events"):
                continue
            bad.append(f"{module}:{node.lineno}: {ast.unparse(arg)}")
    assert not bad, bad


def test_the_package_logger_has_a_null_handler():
    assert any(isinstance(h, logging.NullHandler) for h in logging.getLogger("timelypy").handlers)


def test_every_layer_logs_under_its_own_name():
    names = set()
    for path in _library_modules():
        text = path.read_text()
        if "getLogger(__name__)" in text or 'getLogger("timelypy.' in text:
            names.add(".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts[:2]))
    for layer in LAYER_LOGGERS:
        assert layer in names, f"no module of {layer} logs"


def _dataflow(scope):
    nums_in, nums = scope.new_collection()
    return {"nums": nums_in, "probe": nums.map(lambda x: x * 2).probe()}


def test_sessions_and_workers_log_start_and_end(caplog):
    caplog.set_level(logging.DEBUG, logger="timelypy")
    with tp.open_session(_dataflow, workers=2) as s:
        s.insert("nums", 1)
        s.advance_to(1)
        s.wait("probe")
    messages = [(r.name, r.levelno, r.getMessage()) for r in caplog.records]
    assert any(
        n == "timelypy.workers.sessions.session" and lvl == logging.INFO and "ready" in m
        for n, lvl, m in messages
    ), messages
    assert any(n == "timelypy.workers.sessions.session" and "closed" in m for n, _, m in messages)
    assert any(n == "timelypy.workers.worker" and "built" in m for n, _, m in messages)
    assert any(n == "timelypy.progress.subgraph" for n, _, _ in messages)


def test_one_layer_at_debug(caplog):
    """DEBUG for one layer only: the others stay quiet below WARNING."""
    caplog.set_level(logging.WARNING, logger="timelypy")
    caplog.set_level(logging.DEBUG, logger="timelypy.workers")

    def build(worker):
        nums_in, probe = worker.dataflow(
            lambda scope: (lambda pair: (pair[0], pair[1].probe()))(scope.new_collection())
        )
        nums_in.insert(1)

    tp.execute(build)
    names = {r.name for r in caplog.records}
    assert "timelypy.workers.worker" in names
    assert not any(n.startswith("timelypy.progress") for n in names)


def test_a_run_prints_nothing(capfd):
    def build(worker):
        nums_in, probe = worker.dataflow(
            lambda scope: (lambda pair: (pair[0], pair[1].probe()))(scope.new_collection())
        )
        for x in range(10):
            nums_in.insert(x)

    tp.execute(build, workers=2)
    with tp.open_session(_dataflow) as s:
        s.insert("nums", 1)
        s.advance_to(1)
        s.wait("probe")
    out, err = capfd.readouterr()
    assert out == "" and err == ""
