"""Stream: iterates one Generate call as Chunk items followed by one Completion; cancellable."""
from __future__ import annotations

from typing import Any, Iterator, List, Optional, Union

import grpc

from . import convert
from .datatypes import Chunk, Completion, Result, TokenLogprobs
from .errors import McserveError

Item = Union[Chunk, Completion]


class Stream(Iterator[Item]):
    """One Chunk per server response (the first carries only the request id), then the Completion.

    Iterate from one thread; cancel() may be called from any thread. Errors raise McserveError."""

    def __init__(self, call: Any) -> None:
        self._call = call  # grpc's response iterator, also a grpc.Call
        self._completion: Optional[Completion] = None
        self._finished = False
        self.request_id: Optional[str] = None  # known once the first chunk arrived

    def __iter__(self) -> Stream:
        return self

    def __next__(self) -> Item:
        if self._completion is not None and not self._finished:
            self._finished = True
            self._drain()
            return self._completion
        if self._finished:
            raise StopIteration
        try:
            response = next(self._call)
        except StopIteration:
            self._finished = True
            raise McserveError(grpc.StatusCode.UNKNOWN, "the stream ended without a completion") from None
        except grpc.RpcError as error:
            self._finished = True
            raise McserveError.from_rpc_error(error) from None
        self.request_id = response.request_id
        if response.HasField("complete"):
            self._completion = convert.completion(response.request_id, response.complete)
        return convert.chunk(response)

    def _drain(self) -> None:
        """Reads the call's OK status after the last response, so the call ends cleanly."""
        try:
            for _ in self._call:
                pass
        except grpc.RpcError:
            pass  # the completion already arrived: nothing after it changes the result

    def cancel(self) -> None:
        """Cancels the call (the server aborts the request); the iteration then raises CANCELLED."""
        self._call.cancel()

    def __enter__(self) -> Stream:
        return self

    def __exit__(self, *exc: object) -> None:
        if not self._finished:
            self.cancel()

    def collect(self) -> Result:
        """Consumes the rest of the stream into one Result."""
        text: List[str] = []
        token_ids: List[int] = []
        logprobs: List[TokenLogprobs] = []
        for item in self:
            if isinstance(item, Completion):
                return Result(request_id=item.request_id, text="".join(text), token_ids=token_ids,
                              logprobs=logprobs, completion=item)
            text.append(item.text)
            token_ids.extend(item.token_ids)
            logprobs.extend(item.logprobs)
        raise McserveError(grpc.StatusCode.UNKNOWN, "the stream ended without a completion")
