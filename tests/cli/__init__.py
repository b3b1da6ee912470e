"""The timelypy command line."""
