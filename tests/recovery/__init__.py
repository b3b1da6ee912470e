"""Durable jobs: operator state, the checkpoint store, sessions that checkpoint and restore."""
