"""The `ldpcollect` command line: the one package that wires client and aggregator together."""

import os

# gRPC's core logs a TLS handshake failure at INFO on stderr; the CLI says it in one line.
os.environ.setdefault("GRPC_VERBOSITY", "ERROR")
