"""``python -m timelypy``: the ``timelypy`` command line (see :mod:`timelypy.cli`)."""

from timelypy.cli import main

if __name__ == "__main__":
    main()
