"""Client: the typed Python API of mcserve's gRPC service mcserve.v1.Generation (plus grpc.health.v1)."""
from __future__ import annotations

from typing import Any, Callable, List, Mapping, Optional, Sequence, Tuple, Union

import grpc

from . import convert, health
from ._stubs import pb, pb_grpc
from .channel import PathLike, open_channel
from .datatypes import HealthStatus, ModelInfo, Result, ServerInfo
from .errors import McserveError
from .request import Prompt, generate_request
from .stream import Stream


class Client:
    """A connection to one mcserve server. Thread-safe: calls may be made from any thread at once."""

    def __init__(self, address: str, *, api_key: Optional[str] = None,
                 root_certificates: Optional[PathLike] = None, client_cert: Optional[PathLike] = None,
                 client_key: Optional[PathLike] = None, server_name: Optional[str] = None,
                 timeout: Optional[float] = None) -> None:
        """Connects lazily to `address` (HOST:PORT); TLS iff root_certificates (CA PEM path) is given,
        mutual TLS with client_cert + client_key; `timeout` (seconds) bounds every call, None = none."""
        self._channel = open_channel(address, root_certificates=root_certificates, client_cert=client_cert,
                                     client_key=client_key, server_name=server_name)
        self._stub = pb_grpc.GenerationStub(self._channel)
        self._health_check = self._channel.unary_unary(
            health.CHECK_METHOD, request_serializer=health.HealthCheckRequest.SerializeToString,
            response_deserializer=health.HealthCheckResponse.FromString)
        self._metadata: Tuple[Tuple[str, str], ...] = (("authorization", f"Bearer {api_key}"),) if api_key else ()
        self.address = address
        self.timeout = timeout

    def close(self) -> None:
        """Closes the channel; calls in flight are cancelled."""
        self._channel.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _unary(self, method: Callable[..., Any], request: Any) -> Any:
        """Calls a unary method with the API key and timeout; gRPC errors → McserveError."""
        try:
            return method(request, timeout=self.timeout, metadata=self._metadata)
        except grpc.RpcError as error:
            raise McserveError.from_rpc_error(error) from None

    def stream(self, prompt: Prompt, *, max_tokens: Optional[int] = None, min_tokens: int = 0,
               temperature: Optional[float] = None, top_p: Optional[float] = None, top_k: int = 0,
               min_p: float = 0.0, repetition_penalty: Optional[float] = None, presence_penalty: float = 0.0,
               frequency_penalty: float = 0.0, logit_bias: Optional[Mapping[int, float]] = None,
               seed: Optional[int] = None, stop: Union[str, Sequence[str]] = (),
               stop_token_ids: Sequence[int] = (), ignore_eos: bool = False,
               include_stop_str_in_output: bool = False, logprobs: int = 0, request_id: str = "") -> Stream:
        """Starts a generation (vLLM semantics; None = the server's default) and streams it: Chunk items
        then one Completion. `prompt` is text (BOS added by the server) or token ids (used as given)."""
        request = generate_request(
            prompt, request_id=request_id, max_tokens=max_tokens, min_tokens=min_tokens, temperature=temperature,
            top_p=top_p, top_k=top_k, min_p=min_p, repetition_penalty=repetition_penalty,
            presence_penalty=presence_penalty, frequency_penalty=frequency_penalty, logit_bias=logit_bias,
            seed=seed, stop=stop, stop_token_ids=stop_token_ids, ignore_eos=ignore_eos,
            include_stop_str_in_output=include_stop_str_in_output, logprobs=logprobs)
        return Stream(self._stub.Generate(request, timeout=self.timeout, metadata=self._metadata))

    def generate(self, prompt: Prompt, *, max_tokens: Optional[int] = None, min_tokens: int = 0,
                 temperature: Optional[float] = None, top_p: Optional[float] = None, top_k: int = 0,
                 min_p: float = 0.0, repetition_penalty: Optional[float] = None, presence_penalty: float = 0.0,
                 frequency_penalty: float = 0.0, logit_bias: Optional[Mapping[int, float]] = None,
                 seed: Optional[int] = None, stop: Union[str, Sequence[str]] = (),
                 stop_token_ids: Sequence[int] = (), ignore_eos: bool = False,
                 include_stop_str_in_output: bool = False, logprobs: int = 0, request_id: str = "") -> Result:
        """Like stream() with the same arguments, but waits and returns the whole Result."""
        return self.stream(
            prompt, request_id=request_id, max_tokens=max_tokens, min_tokens=min_tokens, temperature=temperature,
            top_p=top_p, top_k=top_k, min_p=min_p, repetition_penalty=repetition_penalty,
            presence_penalty=presence_penalty, frequency_penalty=frequency_penalty, logit_bias=logit_bias,
            seed=seed, stop=stop, stop_token_ids=stop_token_ids, ignore_eos=ignore_eos,
            include_stop_str_in_output=include_stop_str_in_output, logprobs=logprobs).collect()

    def abort(self, request_id: str) -> None:
        """Aborts a running or queued request by id (its stream ends "cancelled"); NOT_FOUND if unknown."""
        self._unary(self._stub.Abort, pb.AbortRequest(request_id=request_id))

    def tokenize(self, text: str, add_bos: bool = False) -> List[int]:
        """The served model's token ids for `text` (BOS first iff add_bos)."""
        return list(self._unary(self._stub.Tokenize, pb.TokenizeRequest(text=text, add_bos=add_bos)).token_ids)

    def model_info(self) -> ModelInfo:
        """The served model and the server's capacity."""
        return convert.model_info(self._unary(self._stub.GetModelInfo, pb.GetModelInfoRequest()))

    def server_info(self) -> ServerInfo:
        """Version, uptime and the engine's counters."""
        return convert.server_info(self._unary(self._stub.GetServerInfo, pb.GetServerInfoRequest()))

    def health(self, service: str = "") -> HealthStatus:
        """grpc.health.v1 status of the server ("" = overall) or of one service (NOT_FOUND if unknown);
        needs no API key."""
        return health.status_of(self._unary(self._health_check, health.HealthCheckRequest(service=service)))
