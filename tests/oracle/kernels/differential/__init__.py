"""Plain kernels of ``timelypy.differential``: the mirror of its kernel modules."""
