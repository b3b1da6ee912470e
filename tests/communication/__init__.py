"""timelypy.communication and the record hash: wire codec, framing, meshes, routing."""
