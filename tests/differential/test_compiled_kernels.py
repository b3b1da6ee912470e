"""The kernels compiled with mypyc (``timelypy compile-kernels``) meet the same contracts.

One test builds the mirror into a temporary directory through the command line (about 25 s:
mypy's analysis, then a C compiler), checks what it built, and runs in a subprocess, with
``TIMELYPY_KERNELS`` naming the mirror, the kernel-against-twin tests, the histories' tests,
the progress kernels' tests and a slice of the property suite (one worker, iterative
reachability included). It is skipped only where mypyc or a C compiler is missing; CI has both
(mypy is a development dependency). A stale mirror (compiled from other sources) is refused
at import, which needs no compiler to check.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Dict

import pytest
from support.paths import ROOT
from typer.testing import CliRunner

from timelypy.cli import app
from timelypy.kernels import (
    ENVIRONMENT_VARIABLE,
    KernelBuildError,
    compile_kernels,
    kernel_modules,
)

PACKAGE = "tp_compiled_for_tests"

_SUITE = [
    "tests/differential/test_kernels.py",
    "tests/differential/test_kernel_histories.py",
    "tests/progress/test_progress_kernel.py",
    "tests/differential/test_differential_property.py",
    "tests/differential/test_loop_distinct_property.py",
]
"""What runs on the compiled mirror (the kernels' own tests, a slice of the property suite)."""

_ADOPTED = """
import importlib, importlib.machinery, json, os, timelypy, timelypy.kernels as k
from timelypy.differential import arrange, join
from timelypy.differential.trace import spine
used = [f.__module__ for f in (arrange.group_before, join.join_keys, spine.merge_consolidating)]
mirror = importlib.import_module(k.chosen()["timelypy.differential.kernel.histories"])


def job(worker):  # reachability on worker processes, which choose their kernels at import
    import os
    from timelypy.differential import join as j

    seen = []

    def define(scope):
        es, e = scope.new_collection()
        rs, roots = scope.new_collection()
        r = roots.iterate(lambda inner: e.enter(inner.scope).semijoin(inner)
                          .map(lambda sd: sd[1]).concat(roots.enter(inner.scope)).distinct())
        r.inspect(lambda u: seen.append((u[0], u[2])))
        return es, rs

    es, rs = worker.dataflow(define)
    if worker.index == 0:
        rs.insert(0)
        for i in range(60):
            es.insert((i, (i * 7 + 3) % 60))
            es.insert((i, (i * i + 1) % 61))
    es.close()
    rs.close()
    while worker.step():
        pass
    return {"pid": os.getpid(), "used": j.join_keys.__module__, "seen": seen}


workers = timelypy.execute(job, workers=2, backend="processes", timeout=240)
print(json.dumps({"chosen": k.chosen(), "used": used, "compiled_flag": mirror.COMPILED,
                  "workers": workers, "driver": os.getpid()}))
"""


def _compiler_missing() -> bool:
    return importlib.util.find_spec("mypyc") is None or not any(
        shutil.which(c) for c in (os.environ.get("CC", "cc"), "gcc", "clang")
    )


def _env(directory: Path, **more: str) -> Dict[str, str]:
    env = dict(os.environ, **more)
    env[ENVIRONMENT_VARIABLE] = PACKAGE
    env["PYTHONPATH"] = os.pathsep.join(
        [str(directory), str(ROOT), str(ROOT / "tests"), env.get("PYTHONPATH", "")]
    )
    return env


def _python(directory: Path, code: str) -> "subprocess.CompletedProcess[str]":
    """``python -c code`` from the repository, with the mirror in ``directory`` chosen."""
    return subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        env=_env(directory),
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.mark.skipif(_compiler_missing(), reason="mypyc (mypy) or a C compiler is missing")
def test_compiled_kernels_build_are_adopted_and_pass_the_kernel_and_property_tests(
    tmp_path: Path,
) -> None:
    result = CliRunner().invoke(app, ["compile-kernels", str(tmp_path), "--package", PACKAGE])
    assert result.exit_code == 0, result.output
    assert f"export TIMELYPY_KERNELS={PACKAGE}" in result.stdout
    modules = kernel_modules()
    assert "timelypy.differential.kernel.histories" in modules
    assert "timelypy.progress.kernel" in modules
    flagged = []
    for name in modules:  # each copy: no adoption, its COMPILED flag set, the original's hash
        relative = Path(*name.split(".")[1:]).with_suffix(".py")
        copy = (tmp_path / PACKAGE / relative).read_text()
        original = (ROOT / "timelypy" / relative).read_text()
        digest = hashlib.sha256(original.encode()).hexdigest()
        assert "adopt(" not in copy and copy.endswith(f'KERNEL_SOURCE_SHA256 = "{digest}"\n')
        if "\nCOMPILED = False\n" in original:
            flagged.append(name)
            assert "\nCOMPILED = True\n" in copy and "\nCOMPILED = False\n" not in copy
    assert {
        "timelypy.differential.kernel.histories",
        "timelypy.differential.kernel.distinct",
    } <= set(flagged)

    adopted = _python(tmp_path, _ADOPTED)
    assert adopted.returncode == 0, adopted.stderr[-3000:]
    report = json.loads(adopted.stdout)
    assert report["chosen"] == {m: PACKAGE + m[len("timelypy") :] for m in modules}
    assert all(u.startswith(PACKAGE + ".") for u in report["used"]), report["used"]
    assert report["compiled_flag"] is True  # (mypyc took the ``if COMPILED:`` definitions)
    # Worker processes inherit the variables and take the mirror too; their answer is exact.
    workers = report["workers"]
    assert len({w["pid"] for w in workers} | {report["driver"]}) == 3
    assert all(w["used"].startswith(PACKAGE + ".") for w in workers), workers
    counts: Dict[int, int] = {}
    for w in workers:
        for node, diff in w["seen"]:
            counts[node] = counts.get(node, 0) + diff
    reached, frontier = {0}, [0]
    while frontier:
        i = frontier.pop()
        for j in ((i * 7 + 3) % 60, (i * i + 1) % 61) if i < 60 else ():
            if j not in reached:
                reached.add(j)
                frontier.append(j)
    assert len(reached) > 20 and {n for n, c in counts.items() if c} == reached
    assert all(c in (0, 1) for c in counts.values())

    selection = "not plain and (not property or one_worker)"
    tests = subprocess.run(
        [sys.executable, "-m", "pytest", *"-q -p no:cacheprovider -x -m".split(), "not slow"]
        + ["-k", selection, *_SUITE],
        cwd=ROOT,
        env=_env(tmp_path, TIMELYPY_EXAMPLES="30"),
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert tests.returncode == 0, tests.stdout[-3000:] + tests.stderr[-3000:]
    assert " passed" in tests.stdout, tests.stdout[-3000:]


@pytest.mark.skipif(_compiler_missing(), reason="mypyc (mypy) or a C compiler is missing")
def test_a_partial_build_takes_the_kernel_modules_its_modules_import(tmp_path: Path) -> None:
    """Grouping imports the consolidation kernels: asked for grouping alone, the build compiles
    both (mypyc compiles a module with what it imports from the mirror, or fails), and the
    mirror imports and answers as the pure module does."""
    grouping = "timelypy.differential.kernel.grouping"
    built = compile_kernels(tmp_path, package=PACKAGE, modules=[grouping])
    assert built == [
        f"{PACKAGE}.differential.kernel.grouping",
        f"{PACKAGE}.differential.kernel.consolidation",
    ]
    probe = (
        f"import {PACKAGE}.differential.kernel.grouping as g, json\n"
        "print(json.dumps([g.COMPILED, g.group_before([(('a', 1), 0, 1), (('a', 2), 3, 1),"
        " (('b', 1), 1, -1)], 2)]))"
    )
    done = _python(tmp_path, probe)
    assert done.returncode == 0, done.stderr[-3000:]
    flag, (groups, kept) = json.loads(done.stdout)
    assert flag is True
    assert groups == {"a": [[1, 0, 1]], "b": [[1, 1, -1]]} and kept == [[["a", 2], 3, 1]]


def test_a_mirror_compiled_from_other_sources_is_refused(tmp_path: Path) -> None:
    """A mirror module that records another source's hash (an old build after an upgrade)
    stops the import with a message saying to rebuild; a mirror recording none (the plain
    twins) is taken as it is."""
    stale = tmp_path / PACKAGE / "differential" / "kernel"
    stale.mkdir(parents=True)
    for folder in (tmp_path / PACKAGE, tmp_path / PACKAGE / "differential", stale):
        (folder / "__init__.py").write_text("")
    (stale / "consolidation.py").write_text(
        "def consolidate(updates):\n    return updates\n\nKERNEL_SOURCE_SHA256 = '0' * 64\n"
    )
    done = _python(tmp_path, "import timelypy")
    assert done.returncode != 0
    assert "was compiled from another version of timelypy.differential.kernel.consolidation" in (
        done.stderr
    )
    assert "rebuild it (timelypy compile-kernels DIR)" in done.stderr


def test_bad_requests_get_clear_errors(tmp_path: Path) -> None:
    """A package name that is not one, a module outside timelypy, and a build over its time
    bound: each a clear error naming it; the command exits 2 and makes no directory."""
    result = CliRunner().invoke(app, ["compile-kernels", str(tmp_path / "k"), "--package", "a-b"])
    assert result.exit_code == 2
    assert "'a-b' is not a package name" in result.output
    assert not (tmp_path / "k").exists()
    with pytest.raises(ValueError, match="'os.path' is not a timelypy module"):
        compile_kernels(tmp_path, modules=["os.path"])
    with pytest.raises(KernelBuildError, match="mypyc took over 0.001 s|mypyc failed"):
        compile_kernels(
            tmp_path, modules=["timelypy.differential.kernel.consolidation"], timeout=1e-3
        )
