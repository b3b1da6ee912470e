"""timelypy.workers: backends, sessions, faults, Ray."""
