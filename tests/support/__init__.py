"""Test helpers: hypothesis strategies, the differential harness, the two column modes it runs
in, Ray cluster helpers, paths.

Imported as the top-level package ``support`` (pytest's ``pythonpath = ["tests"]``).
"""
