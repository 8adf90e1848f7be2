"""ldpcollect shared core: mechanisms, accounting, location IDs and the wire stubs.

This package is what devices and the aggregator share. It imports neither `client` nor
`aggregator` (DESIGN.md section 5).
"""

__version__ = "0.1.0"
