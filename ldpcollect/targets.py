"""Several aggregator replicas behind one channel: gRPC's client-side round_robin.

`--server` takes one address (`host:port`; a DNS name that resolves to several addresses is
spread over all of them) or several (`h1:p1,h2:p2`). gRPC keeps a subchannel per address,
sends each call to the next ready one, skips a replica whose connection failed and keeps
trying to reconnect it in the background. A call that was on a replica when it died fails
UNAVAILABLE; callers retry it with the same report ids (the replicas share one store, which
counts each report once).
"""

from __future__ import annotations

import ipaddress
import json
import socket

from ldpcollect.errors import ParameterError

ROUND_ROBIN = json.dumps({"loadBalancingConfig": [{"round_robin": {}}]})
# The port `ldpcollect serve` listens on by default: a lone host in --server gets it (gRPC's
# own default would be 443, where no aggregator listens unless told to).
DEFAULT_PORT = 50051


def with_default_port(server: str) -> str:
    """`server` with DEFAULT_PORT added when it is one host without a port (`localhost`,
    `collector.example`, `[::1]`); anything else unchanged."""
    text = server.strip()
    if not text or "," in text or "/" in text or text.startswith("unix:"):
        return server
    if text.startswith("[") and text.endswith("]"):
        return f"{text}:{DEFAULT_PORT}"
    if ":" not in text:
        return f"{text}:{DEFAULT_PORT}"
    return server


def split_addresses(server: str, option: str = "--server") -> list[tuple[str, int]]:
    """(host, port) of each comma-separated `host:port` ([v6]:port for IPv6 literals);
    `option` is what a refusal names."""
    addresses: list[tuple[str, int]] = []
    for part in server.split(","):
        host, _, port_text = part.strip().rpartition(":")
        host = host.strip("[]")
        if not host or not port_text.isdigit() or not 0 < int(port_text) < 65536:
            raise ParameterError(option, server, "host:port, or several: h1:p1,h2:p2")
        addresses.append((host, int(port_text)))
    return addresses


def _ip(host: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        return ipaddress.ip_address(host)
    except ValueError:
        return None


def _resolve(host: str, port: int, option: str) -> list[str]:
    """The IP addresses of `host` (a literal resolves to itself): its IPv4 addresses, or its
    IPv6 ones when it has none (one channel list holds one family)."""
    if _ip(host) is not None:
        return [host]
    error = ""
    for family in (socket.AF_INET, socket.AF_INET6):
        try:
            found = socket.getaddrinfo(host, port, family=family, type=socket.SOCK_STREAM)
        except socket.gaierror as exc:
            error = str(exc)
            continue
        return list(dict.fromkeys(str(info[4][0]) for info in found))
    raise ParameterError(option, host, "a resolvable host name", error)


def channel_target(server: str, option: str = "--server") -> tuple[str, list[tuple[str, str]]]:
    """The gRPC target and channel options that spread calls over the addresses in `server`.

    One address stays a plain target (gRPC's DNS resolver finds every address of a name);
    several become one `ipv4:` (or `ipv6:`) list, host names resolved now, with the first
    host name as the TLS authority (the name a server certificate must carry).
    """
    options = [("grpc.service_config", ROUND_ROBIN)]
    if "," not in server:
        return with_default_port(server), options
    addresses = split_addresses(server, option)
    ips = [(ip, port) for host, port in addresses for ip in _resolve(host, port, option)]
    versions = {ipaddress.ip_address(ip).version for ip, _ in ips}
    if len(versions) != 1:
        raise ParameterError(option, server, "addresses of one IP family (all v4 or all v6)")
    if versions == {4}:
        target = "ipv4:" + ",".join(f"{ip}:{port}" for ip, port in ips)
    else:
        target = "ipv6:" + ",".join(f"[{ip}]:{port}" for ip, port in ips)
    names = [host for host, _ in addresses if _ip(host) is None]
    if names:
        options.append(("grpc.default_authority", f"{names[0]}:{addresses[0][1]}"))
    return target, options
