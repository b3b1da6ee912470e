"""Tests of timelypy.windows."""
