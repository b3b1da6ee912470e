"""Connectors between timelypy sessions and other systems (Spark: :mod:`.spark`).

This layer may import every other layer; no other layer imports it. Each connector imports its
third-party library lazily, so ``import timelypy.connectors.spark`` works without pyspark and
says what to install when a function that needs it is called.
"""

from __future__ import annotations

__all__: list = []
