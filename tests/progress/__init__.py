"""timelypy.order and timelypy.progress: partial orders, antichains, progress tracking."""
