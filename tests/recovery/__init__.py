"""Durable jobs: operator state, checkpoint stores, sessions that checkpoint and restore."""
