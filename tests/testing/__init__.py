"""timelypy.testing: the helpers users test their own dataflows with."""
