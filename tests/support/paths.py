"""Where things are in the checkout: the repository root, the examples, the package."""

from __future__ import annotations

import pathlib

ROOT = pathlib.Path(__file__).resolve().parent.parent.parent
"""The repository root (the directory of README.md and pyproject.toml)."""

EXAMPLES = ROOT / "examples"
PACKAGE = ROOT / "timelypy"
