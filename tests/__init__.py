"""The timelypy test suite, laid out like the package (see docs/architecture.md).

A package so that test modules in different folders may share a basename; the oracles and
helpers import as top-level packages (``oracle``, ``support``: pytest's ``pythonpath``).
"""
