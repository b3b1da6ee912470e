"""Plain kernels: a second implementation of every kernel module, mirroring its path below
``timelypy`` (see ``timelypy.kernels``); ``TIMELYPY_KERNELS=oracle.kernels`` runs the engine on them."""
