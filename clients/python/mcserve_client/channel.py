"""Opens the gRPC channel: plaintext, TLS verified against a CA, or mutual TLS with a client certificate."""
from __future__ import annotations

import os
from typing import List, Optional, Tuple, Union

import grpc

PathLike = Union[str, "os.PathLike[str]"]


def _read(option: str, path: PathLike) -> bytes:
    """The file's bytes; OSError naming the option and the path if it cannot be read."""
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError as error:
        raise OSError(error.errno, f"{option}: cannot read {os.fspath(path)!r}: {error.strerror}") from None


def open_channel(address: str, *, root_certificates: Optional[PathLike] = None,
                 client_cert: Optional[PathLike] = None, client_key: Optional[PathLike] = None,
                 server_name: Optional[str] = None) -> grpc.Channel:
    """A channel to `address` (HOST:PORT); TLS iff root_certificates (a PEM CA file) is given."""
    if not address or not isinstance(address, str):
        raise ValueError(f"address: expected HOST:PORT, got {address!r}")
    if (client_cert is None) != (client_key is None):
        raise ValueError("client_cert and client_key go together (mutual TLS needs both)")
    if root_certificates is None:
        if client_cert is not None or server_name is not None:
            raise ValueError("client_cert/client_key/server_name need TLS: pass root_certificates (the CA's PEM file)")
        return grpc.insecure_channel(address)
    credentials = grpc.ssl_channel_credentials(
        root_certificates=_read("root_certificates", root_certificates),
        private_key=_read("client_key", client_key) if client_key is not None else None,
        certificate_chain=_read("client_cert", client_cert) if client_cert is not None else None)
    options: List[Tuple[str, str]] = []
    if server_name:
        options.append(("grpc.ssl_target_name_override", server_name))
    return grpc.secure_channel(address, credentials, options=options)
