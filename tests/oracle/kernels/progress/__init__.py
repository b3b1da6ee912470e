"""Plain twins of the kernels of ``timelypy.progress``."""
