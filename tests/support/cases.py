"""Many seeded cases in one test: a failure names the case it came from.

A test that checks a fixed list of seeds loops over them inside one test function (one collected
test, not one per seed) and wraps each case in :func:`case`, so that a failure still says which
seed (and which other parameters) produced it.
"""

from __future__ import annotations

import contextlib
from typing import Any, Iterator


@contextlib.contextmanager
def case(**labels: Any) -> Iterator[None]:
    """Run one case; an exception leaving it carries a note naming ``labels`` (``seed=3``)."""
    try:
        yield
    except Exception as exc:
        note = "in the case " + ", ".join(f"{k}={v!r}" for k, v in labels.items())
        if hasattr(exc, "add_note"):  # Python 3.11+: the original exception, annotated
            exc.add_note(note)
            raise
        raise AssertionError(f"{note}: {exc!r}") from exc
