"""Test helpers: hypothesis strategies, the differential harness, Ray cluster helpers, paths.

Imported as the top-level package ``support`` (pytest's ``pythonpath = ["tests"]``).
"""
