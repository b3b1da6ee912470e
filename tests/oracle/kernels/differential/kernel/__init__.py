"""Plain twins of ``timelypy.differential.kernel``: the same names and contracts, plainly."""
