"""Plain kernels of ``timelypy.differential.kernel``, one module per kernel module."""
