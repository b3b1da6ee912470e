"""Many seeded cases in one test: a failure names the case it came from.

A test that checks a fixed list of seeds loops over them inside one test function (one collected
test, not one per seed: :func:`over_seeds`) and wraps each case in :func:`case`, so that a failure
still says which seed produced it (pytest's own parameters name the rest).
"""

from __future__ import annotations

import contextlib
import functools
import inspect
from typing import Any, Callable, Iterable, Iterator


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


def over_seeds(seeds: Iterable[int]) -> Callable[[Callable[..., None]], Callable[..., None]]:
    """A test ``f(..., seed)`` run for every seed of ``seeds`` inside one collected test (each
    run wrapped in :func:`case`): the decorator stands where ``@pytest.mark.parametrize("seed",
    seeds)`` would, innermost, and the other parameters stay pytest's. Called with every
    parameter of ``f`` (the seed too), it runs that one case."""
    seeds = list(seeds)

    def wrap(f: Callable[..., None]) -> Callable[..., None]:
        signature = inspect.signature(f)

        @functools.wraps(f)
        def test(*args: Any, **kwargs: Any) -> None:
            if len(args) + len(kwargs) == len(signature.parameters):
                f(*args, **kwargs)  # called as written, seed given: that one case
                return
            for seed in seeds:
                with case(seed=seed):
                    f(*args, seed=seed, **kwargs)

        # pytest reads the parameters from the signature: ``seed`` is no fixture
        test.__signature__ = signature.replace(  # type: ignore[attr-defined]
            parameters=[p for name, p in signature.parameters.items() if name != "seed"]
        )
        return test

    return wrap
