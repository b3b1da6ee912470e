"""``timelypy.datalog``: incremental Datalog (a Soufflé-compatible subset) on the engine.

The same names as :mod:`timelypy.frontends.datalog`, so that ``import timelypy.datalog`` and
``from timelypy import datalog`` both work. See ``docs/datalog.md``.
"""

from .frontends import datalog as _datalog
from .frontends.datalog import *  # noqa: F403 - the alias re-exports the package's names

__all__ = list(_datalog.__all__)
