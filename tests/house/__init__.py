"""The shape of the house: layers, leaf modules, sizes, the public API, logging."""
