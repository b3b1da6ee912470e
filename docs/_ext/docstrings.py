"""A griffe extension for the API pages: docstrings written for Python read well as Markdown.

Doctest examples (``>>>`` lines up to the next blank line) are put in ```pycon fences (Markdown
would read ``>>>`` as nested quotes), and Sphinx roles such as :class:`~pkg.Name` become code
spans (``Name``). Only the rendered pages change; the docstrings stay as they are.
"""

from __future__ import annotations

import re
from typing import Any, List

import griffe

_ROLE = re.compile(r":(?:class|meth|func|mod|attr|exc|data|obj|ref):`(~?)([^`<]+?)(?:\s*<[^>]+>)?`")


def _role(match: "re.Match[str]") -> str:
    short, target = match.group(1), match.group(2)
    return f"`{target.rsplit('.', 1)[-1] if short else target}`"


def fence_doctests(text: str) -> str:
    """``text`` with every doctest run inside a ```pycon fence and roles as code spans."""
    out: List[str] = []
    in_fence = in_doctest = False
    indent = ""
    for line in text.splitlines():
        stripped = line.lstrip()
        if in_doctest and not stripped:
            out.append(indent + "```")
            in_doctest = False
        if not in_doctest and stripped.startswith("```"):
            in_fence = not in_fence
        elif not in_fence and not in_doctest and (stripped == ">>>" or stripped.startswith(">>> ")):
            indent = line[:len(line) - len(stripped)]
            out.append(indent + "```pycon")
            in_doctest = True
        out.append(line if in_fence or in_doctest else _ROLE.sub(_role, line))
    if in_doctest:
        out.append(indent + "```")
    return "\n".join(out)


class DoctestFences(griffe.Extension):
    """Rewrites every docstring's text as :func:`fence_doctests` says."""

    def on_instance(self, *, obj: Any, **kwargs: Any) -> None:
        if obj.docstring is not None:
            obj.docstring.value = fence_doctests(obj.docstring.value)
