"""The systems ``benchmarks/datalog.py`` runs side by side, each in a process of its own."""
