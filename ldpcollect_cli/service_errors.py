"""Turn failures into one line on stderr and an exit code: no tracebacks for expected errors."""

from __future__ import annotations

from collections.abc import Callable

import grpc
import typer
from rich.console import Console
from rich.text import Text

from client.retry import error_code, error_details
from ldpcollect.errors import ParameterError
from ldpcollect_cli.command_words import in_command_words

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
        details = in_command_words(error_details(err))
        _say(f"{name}: {details}")
        raise typer.Exit(EXIT_RPC) from None
    except ParameterError as err:
        _say(str(err))
        raise typer.Exit(EXIT_USAGE) from None
    except Exception as err:
        from client.device import ReportFailed  # loaded already if it was raised
        from client.fleet import FleetError
        from client.secure_collector import LeaderMisstated
        from client.secure_keys import UntrustedAggregator

        refusals = FleetError | ReportFailed | OSError | UntrustedAggregator | LeaderMisstated
        if not isinstance(err, refusals):
            raise
        _say(str(err))
        raise typer.Exit(EXIT_RPC) from None


def _say(message: str) -> None:
    stderr.print(Text.assemble(("error: ", "bold red"), message), highlight=False, soft_wrap=True)
