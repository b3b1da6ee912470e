"""The hot loops of the differential layer, one contract per module.

Each module here is a *kernel module*: pure Python, its contract (inputs, outputs, invariants,
cost) stated in its docstring, its kernels listed in ``__all__``, and at its bottom
``adopt(__name__, globals())`` (see :mod:`timelypy.kernels`), so that another implementation
of the same names (compiled, or the plain twins the tests run the property suite against) drops
in behind them when ``TIMELYPY_KERNELS`` names a package that mirrors these paths. Operators
call kernels only by these names, never by reaching into a kernel's helpers.

- :mod:`.consolidation`: sum the diffs of equal ``(data, time)`` pairs, advance times to a
  compaction frontier.
- :mod:`.grouping`: the arrange batcher's grouping of pending updates by key, and the
  consolidation of the groups.
- :mod:`.merge`: the spine's merge of a newer batch's updates into a merged batch, and its
  compaction passes.
- :mod:`.join`: the join's products (what a matching pair of updates makes) and its walk of a
  batch's keys against the other trace.
- :mod:`.histories`: reduce's per-key histories at partially ordered times (reading a history
  at a time, compacting it to a frontier's meet, closing times under joins).
- :mod:`.distinct`: ``distinct`` at ``Product(int, int)`` times on quad lists (the ingest of
  updates and the evaluation of keys; these mutate the operator's containers).

Kernels work on plain Python data (dicts, lists, tuples); the trace types wrap them, so a
kernel never sees a batch or a spine.
"""
