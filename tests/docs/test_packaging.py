"""The package as a user gets it: ``python -m build`` makes a wheel that installs in a clean venv
(no checkout on its path) and runs an example; ``timelypy --version`` names the installed version.

Building and installing fetch setuptools and the core dependencies from the package index, as a
user's ``pip install`` does.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import venv

import pytest
from support.paths import ROOT

pytestmark = pytest.mark.slow


def _run(args, cwd, timeout=600):
    done = subprocess.run(
        [str(a) for a in args], capture_output=True, text=True, cwd=cwd, timeout=timeout
    )
    assert done.returncode == 0, f"{args}:\n{done.stdout[-2000:]}\n{done.stderr[-4000:]}"
    return done.stdout


@pytest.mark.timeout(900)
def test_wheel_installs_in_a_clean_venv_and_runs_an_example(tmp_path):
    pytest.importorskip("build", reason="the dev extra brings `build`: pip install -e '.[dev]'")
    source = tmp_path / "source"
    # Build from a copy of the tracked files, so that nothing the checkout has lying around
    # (an egg-info, a build/ directory) leaks into the wheel.
    files = _run(["git", "ls-files", "-z"], cwd=ROOT).split("\0")
    for name in filter(None, files):
        if not (ROOT / name).is_file():
            continue
        (source / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / name, source / name)
    dist = tmp_path / "dist"
    _run([sys.executable, "-m", "build", "--wheel", "--outdir", dist, source], cwd=tmp_path)
    wheels = list(dist.glob("timelypy-*.whl"))
    assert len(wheels) == 1, wheels

    env_dir = tmp_path / "venv"
    venv.EnvBuilder(with_pip=True, clear=True).create(env_dir)
    python = env_dir / "bin" / "python"
    _run(
        [python, "-m", "pip", "install", "-q", "--disable-pip-version-check", wheels[0]],
        cwd=tmp_path,
    )

    work = tmp_path / "user"  # a directory with no timelypy checkout in it
    work.mkdir()
    shutil.copy2(ROOT / "examples" / "skip_level.py", work / "skip_level.py")
    where = _run([python, "-c", "import timelypy, sys; print(timelypy.__file__)"], cwd=work)
    assert str(env_dir) in where and str(ROOT) not in where, where
    out = _run([python, "skip_level.py"], cwd=work)
    assert out.strip(), "the example printed nothing"
    cli = _run([env_dir / "bin" / "timelypy", "--version"], cwd=work)
    assert "0." in cli or "1." in cli, cli
