"""The README's code blocks run as written, each alone, as a script (as a newcomer pastes one).

Nothing is prepended: a block that forgets its imports fails here. ``tests/docs/test_docs.py`` runs
the same blocks in order in one namespace, with the pages of docs/.
"""

import re
import subprocess
import sys

import pytest
from support.paths import ROOT

README = ROOT / "README.md"


def _blocks():
    return re.findall(r"```python\n(.*?)```", README.read_text(), re.S)


def test_readme_has_python_blocks():
    assert len(_blocks()) >= 2


@pytest.mark.processes
@pytest.mark.timeout(180)
@pytest.mark.parametrize("index", range(len(_blocks())))
def test_readme_python_blocks_run_alone(tmp_path, index):
    script = tmp_path / f"readme_block_{index}.py"
    script.write_text(_blocks()[index])
    done = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=170, cwd=tmp_path
    )
    assert done.returncode == 0, done.stderr[-3000:]
