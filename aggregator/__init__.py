"""Aggregator side of ldpcollect: gRPC services, rounds, stores, releases and the ledger.

Imports the shared core (`ldpcollect`), never `client`.
"""
