"""timelypy.io: file sources, watched directories, sinks, stdio."""
