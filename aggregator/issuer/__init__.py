"""The token issuer role (docs/admission.md): per-epoch keys on disk, a durable per-device
quota, enrollment secrets, and the `ldpcollect.v1.Issuer` gRPC service over the shared core's
`ldpcollect.admission`. It runs as its own process (`ldpcollect issuer serve`), apart from the
aggregator: the operator may run it elsewhere, and it never sees a report.
"""
