"""timelypy.dataflow: the timely layer observed from outside, scopes, graphs."""
