"""Turn failures into one line on stderr and an exit code: no tracebacks for expected errors.

With `--json` on the command line the same error also goes to stdout as one JSON object
(`{"error": {"code", "message", "exit_code"}}`), so a script reading stdout sees it.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable

import grpc
import typer
from rich.console import Console
from rich.text import Text

from client.retry import error_code, error_details
from ldpcollect.errors import ParameterError
from ldpcollect_cli.command_words import in_command_words
from ldpcollect_cli.connection_errors import explain

stderr = Console(stderr=True)

EXIT_RPC = 1
EXIT_USAGE = 2


def guarded(work: Callable[[], None]) -> None:
    """Run `work`; gRPC errors exit 1 with the status code and the server's message."""
    try:
        work()
    except grpc.RpcError as err:
        code = error_code(err)
        name = code.name if code is not None else "UNKNOWN"
        details = error_details(err)
        message = explain(name, details) or in_command_words(details)
        _fail(name, message, EXIT_RPC)
    except ParameterError as err:
        _fail("INVALID_ARGUMENT", str(err), EXIT_USAGE)
    except Exception as err:
        from client.device import ReportFailed  # loaded already if it was raised
        from client.fleet import FleetError
        from client.secure_collector import LeaderMisstated
        from client.secure_keys import UntrustedAggregator

        refusals = FleetError | ReportFailed | OSError | UntrustedAggregator | LeaderMisstated
        if not isinstance(err, refusals):
            raise
        _fail(type(err).__name__, str(err), EXIT_RPC, with_code=False)


def _fail(code: str, message: str, exit_code: int, *, with_code: bool = True) -> None:
    """Say the error (stderr; stdout too as JSON under --json) and exit with `exit_code`.
    gRPC statuses are named in the line (`UNAVAILABLE: ...`), parameter errors are not."""
    shown = f"{code}: {message}" if with_code and exit_code == EXIT_RPC else message
    _say(shown)
    if "--json" in sys.argv[1:]:
        error = {"code": code, "message": message, "exit_code": exit_code}
        sys.stdout.write(json.dumps({"error": error}) + "\n")
        sys.stdout.flush()
    raise typer.Exit(exit_code) from None


def _say(message: str) -> None:
    stderr.print(Text.assemble(("error: ", "bold red"), message), highlight=False, soft_wrap=True)
