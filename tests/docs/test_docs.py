"""Every code block of README.md and docs/ runs as written, every link stays in the repository,
and every docstring example of the package prints what it shows.

Sybil reads each page; its ```python blocks run in order in one namespace per page, like a
reader pasting them one after the other into one interpreter (``__name__`` is ``"__main__"``
there, as in an interpreter, so ``if __name__ == "__main__":`` blocks run). A block written as
a doctest (``>>>``) must print exactly what the page shows. Nothing is prepended to a block:
a page imports what it uses. ```bash, ```console and unlabelled blocks are not run. Pages run
in a fresh temporary directory (a page may write files).
"""

from __future__ import annotations

import os
import re
from typing import List

import pytest
from support.paths import ROOT
from sybil import Sybil
from sybil.example import SybilFailure
from sybil.parsers.markdown import PythonCodeBlockParser, SkipParser
from sybil.parsers.rest import DocTestParser

DOCS = ROOT / "docs"

# Pages whose blocks start worker processes, or need the tests' local Ray (``ray_session``).
PROCESSES_PAGES = {"README.md", "docs/guide/workers.md"}
RAY_PAGES = {"docs/ray.md"}
SPARK_PAGES = {"docs/spark.md"}
# Pages not run yet, with the reason (each is a defect to fix in the page, not in this test).
NOT_RUN: dict = {}

SYBIL = Sybil(parsers=[PythonCodeBlockParser(), SkipParser()], path=str(ROOT))


def _pages() -> List[str]:
    pages = ["README.md"] + sorted(str(p.relative_to(ROOT)) for p in DOCS.rglob("*.md"))
    return [p for p in pages if (ROOT / p).is_file()]


def _param(page: str):
    marks = []
    if page in PROCESSES_PAGES:
        marks.append(pytest.mark.processes)
    if page in RAY_PAGES:
        marks.append(pytest.mark.ray)
    if page in SPARK_PAGES:
        marks.append(pytest.mark.spark)
    return pytest.param(page, marks=marks, id=page)


@pytest.mark.timeout(600)
@pytest.mark.parametrize("page", [_param(p) for p in _pages()])
def test_page_code_blocks_run(page, request, tmp_path, monkeypatch):
    if page in NOT_RUN:
        pytest.skip(NOT_RUN[page])
    if page in RAY_PAGES:
        request.getfixturevalue("ray_session")
    monkeypatch.chdir(tmp_path)
    document = SYBIL.parse(ROOT / page)
    document.namespace["__name__"] = "__main__"
    environment = dict(os.environ)  # a page may set variables, as a reader would
    try:
        for example in document.examples():
            try:
                example.evaluate()
            except SybilFailure:
                raise  # names the page and line, expected and got
            except Exception as exc:
                raise AssertionError(
                    f"{page}, the block at line {example.line}: {type(exc).__name__}: {exc}"
                ) from exc
    finally:
        for name in set(os.environ) - set(environment):
            del os.environ[name]
        os.environ.update(environment)


DOCSTRINGS = Sybil(parsers=[DocTestParser()], path=str(ROOT))


def _modules_with_examples() -> List[str]:
    return sorted(
        str(p.relative_to(ROOT))
        for p in (ROOT / "timelypy").rglob("*.py")
        if ">>>" in p.read_text()
    )


@pytest.mark.timeout(300)
@pytest.mark.parametrize("module", _modules_with_examples())
def test_docstring_examples_run(module, tmp_path, monkeypatch):
    """The ``>>>`` examples of a module's docstrings print what they show. As on a page, they
    run in order in one namespace per module (a class's example may set up its methods')."""
    monkeypatch.chdir(tmp_path)
    document = DOCSTRINGS.parse(ROOT / module)
    for example in document.examples():
        example.evaluate()


def test_every_page_has_python_blocks_or_none_to_run():
    # A ```py or ```Python block would silently not run: only ```python is executed.
    bad = []
    for page in _pages():
        for n, line in enumerate((ROOT / page).read_text().splitlines(), 1):
            fence = re.match(r"\s*```\s*(\S+)", line)
            if (
                fence
                and fence.group(1).lower() in ("py", "python3", "pycon")
                or (fence and fence.group(1) != "python" and fence.group(1).lower() == "python")
            ):
                bad.append(f"{page}:{n}: {line.strip()}")
    assert not bad, bad


OUTSIDE_WORDS = ("seed 00", "engine-brief", "house-review", "../shared", "ARCHITECTURE.md")


def test_links_and_text_stay_inside_the_repository():
    problems = []
    for page in _pages():
        path = ROOT / page
        text = path.read_text()
        problems += [f"{page}: mentions {w!r}" for w in OUTSIDE_WORDS if w in text]
        for target in re.findall(r"\]\(([^)\s]+)\)", text):
            if re.match(r"[a-z]+://|mailto:|#", target):
                continue
            file = (path.parent / target.split("#")[0]).resolve()
            if ROOT not in file.parents and file != ROOT:
                problems.append(f"{page}: link {target} leaves the repository")
            elif not file.exists():
                problems.append(f"{page}: link {target} names no file")
    assert not problems, problems
