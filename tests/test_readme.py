"""The README's code blocks run as written (as scripts, like a newcomer would)."""

import pathlib
import re
import subprocess
import sys

import pytest

README = pathlib.Path(__file__).resolve().parent.parent / "README.md"


def _blocks():
    return re.findall(r"```python\n(.*?)```", README.read_text(), re.S)


@pytest.mark.processes
@pytest.mark.timeout(180)
@pytest.mark.parametrize("index", range(2))
def test_readme_python_blocks_run(tmp_path, index):
    code = _blocks()[index]
    if "import timelypy as tp" not in code:
        code = "import timelypy as tp\n" + code
    script = tmp_path / f"readme_block_{index}.py"
    script.write_text(code)
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                          timeout=170, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
