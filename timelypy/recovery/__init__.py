"""Durable jobs: checkpoints at closed times, restore without recomputing, rescale.

The recovery layer sits above the differential operators and below launch (the workers and
sessions call it; no operator imports it). Operators declare their state through the
:class:`~timelypy.dataflow.state.Stateful` protocol; this package collects a worker's states at a
closed time, writes them to a checkpoint store (a local directory or an object store), publishes
a manifest that makes a checkpoint visible atomically, and gives a restoring worker the pieces it
owns.
"""
