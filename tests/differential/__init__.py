"""timelypy.differential: collections, arrangements, traces, joins, reduce, iterate."""
