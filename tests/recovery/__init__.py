"""timelypy.recovery: the checkpoint store, snapshots of operator state, restore in sessions."""
