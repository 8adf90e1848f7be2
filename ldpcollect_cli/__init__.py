"""The `ldpcollect` command line: the one package that wires client and aggregator together."""
