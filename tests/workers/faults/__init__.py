"""Faults: user errors named on every backend, stalls, dead and hung workers."""
