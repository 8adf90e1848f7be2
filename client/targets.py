"""Several aggregator replicas behind one channel: `ldpcollect.targets` (shared with the
leader, which spreads its jobs over several helper replicas the same way)."""

from ldpcollect.targets import (
    DEFAULT_PORT,
    ROUND_ROBIN,
    channel_target,
    split_addresses,
    with_default_port,
)

__all__ = ["DEFAULT_PORT", "ROUND_ROBIN", "channel_target", "split_addresses", "with_default_port"]
