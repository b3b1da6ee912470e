"""timelypy.connectors: PySpark, Spark on Ray (RayDP)."""
