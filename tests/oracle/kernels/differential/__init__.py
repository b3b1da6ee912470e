"""Plain twins of the kernel modules of ``timelypy.differential``."""
