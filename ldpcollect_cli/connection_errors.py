"""gRPC's connection failures in one line that names the fix.

gRPC reports a stopped server, a wrong port, a TLS mismatch or a missing CA as UNAVAILABLE with
transport details ("connections to all backends failing ... Socket closed"), which say what
broke but not what to do. Each rule below recognises one such failure by its details and
says it in the operator's terms; anything else is left as gRPC said it.
"""

from __future__ import annotations

import re
from typing import Final
from urllib.parse import unquote

_ADDRESS: Final = re.compile(r"ipv[46]:(\S+?):\s")
_RESOLVING: Final = re.compile(r"errors resolving (\S+?):")

_SERVE_HINT: Final = "the one `ldpcollect serve` printed, 50051 by default"

RULES: Final = (
    (
        re.compile(r"Connection refused|Failed to connect to remote host"),
        "no aggregator is listening at {where}: start one (`ldpcollect serve`), or give "
        "--server (or LDPCOLLECT_SERVER) the address `ldpcollect serve` printed",
    ),
    (
        re.compile(r"Socket closed|Connection reset by peer|Broken pipe"),
        "the server at {where} closed the connection, as a TLS server does to a plaintext "
        "client: give its CA with --tls-ca CA.pem (or LDPCOLLECT_TLS_CA)",
    ),
    (
        re.compile(r"WRONG_VERSION_NUMBER|wrong version number"),
        "the server at {where} does not speak TLS: for a plaintext aggregator leave out "
        f"--tls-ca (and LDPCOLLECT_TLS_CA); otherwise check the port: {_SERVE_HINT}",
    ),
    (
        re.compile(r"CERTIFICATE_VERIFY_FAILED|certificate verify failed"),
        "the certificate of the server at {where} is not signed by the CA in --tls-ca: give "
        "the CA that signed the aggregator's certificate (make-dev-certs.sh writes ca.pem)",
    ),
    (
        re.compile(r"Peer name .* is not in peer certificate|hostname mismatch"),
        "the certificate of the server at {where} does not name the host in --server: use a "
        "name it carries (its subject alternative names), e.g. the one given to make-dev-certs",
    ),
    (
        re.compile(r"Failed parsing HTTP/2|http1\.x server|Trying to connect an http1"),
        f"something other than a gRPC server answers at {{where}}: check the port ({_SERVE_HINT})",
    ),
    (
        re.compile(r"errors resolving|DNS resolution failed|Domain name not found"),
        "the host in --server ({where}) does not resolve: check its spelling, or give an IP "
        "address",
    ),
)

# How gRPC's own transport failures begin. A status an ldpcollect server sent (say, a leader
# whose helper is unreachable) begins with the server's own sentence and keeps it: its
# details may quote the helper's transport error, which is not this client's connection.
_TRANSPORT: Final = re.compile(
    r"\s*(failed to connect to all addresses|connections to all backends failing|"
    r"DNS resolution failed|Domain name not found|errors resolving|empty address list|"
    r"Socket closed|Connection reset|Connection refused|Broken pipe|recvmsg|sendmsg|"
    r"Ssl handshake|Handshake|Cancelling all calls|Deadline Exceeded|Failed parsing HTTP/2|"
    r"Trying to connect an http1|ipv[46]:|unix:)",
    re.IGNORECASE,
)

UNIMPLEMENTED_HINT: Final = (
    "the server at --server does not offer this ldpcollect service: is it the aggregator's "
    f"port, not the token issuer's or another service's? The aggregator's port is {_SERVE_HINT}"
)


def explain(code: str, details: str) -> str | None:
    """The one-line explanation of a connection failure, or None when it is not one."""
    if code == "UNIMPLEMENTED" and ("Method not found" in details or not details):
        return UNIMPLEMENTED_HINT
    if code not in ("UNAVAILABLE", "UNKNOWN", "DEADLINE_EXCEEDED"):
        return None
    if not _TRANSPORT.match(details):
        return None
    for pattern, template in RULES:
        if pattern.search(details):
            return template.format(where=_where(details))
    return None


def _where(details: str) -> str:
    found = _ADDRESS.search(details) or _RESOLVING.search(details)
    return unquote(found.group(1)) if found else "--server"
