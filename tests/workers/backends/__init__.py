"""Backends: the registry, several workers, the supervisor, the collector policy."""
