"""ldpcollect shared core: mechanisms, accounting, location IDs and the wire stubs.

This package is what devices and the aggregator share. It imports neither `client` nor
`aggregator` (docs/design.md, "Layout and layering").
"""

__version__ = "0.1.0"
