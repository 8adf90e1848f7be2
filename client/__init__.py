"""Device side of ldpcollect: the device SDK, fleet simulation and load generation.

Imports the shared core (`ldpcollect`), never `aggregator`.
"""
