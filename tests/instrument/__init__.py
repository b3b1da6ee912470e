"""timelypy.instrument and timelypy.stats: events from the hot paths and operator statistics."""
