"""The one exception the client raises for a failed call: McserveError keeps the gRPC status code."""
from __future__ import annotations

import grpc


class McserveError(Exception):
    """A call failed: `code` is the grpc.StatusCode (from the server or local checks), `message` says why."""

    def __init__(self, code: grpc.StatusCode, message: str) -> None:
        super().__init__(f"{code.name}: {message}")
        self.code = code
        self.message = message

    @property
    def code_name(self) -> str:
        """The status code's name, e.g. "INVALID_ARGUMENT"."""
        return self.code.name

    @classmethod
    def from_rpc_error(cls, error: grpc.RpcError) -> McserveError:
        """Wraps what grpc raised (a grpc.Call carries code() and details())."""
        code = error.code() if isinstance(error, grpc.Call) else grpc.StatusCode.UNKNOWN
        details = error.details() if isinstance(error, grpc.Call) else str(error)
        return cls(code or grpc.StatusCode.UNKNOWN, details or "(no details)")


def invalid_argument(message: str) -> McserveError:
    """A request refused before it was sent, with the code the server would have used."""
    return McserveError(grpc.StatusCode.INVALID_ARGUMENT, message)
