"""Protobuf messages (mcserve.v1) → the client's dataclasses."""
from __future__ import annotations

import dataclasses
from typing import Any, Dict, List, Tuple

from ._stubs import pb
from .datatypes import (CheckpointStats, Chunk, Completion, FinishReason, ModelInfo, ServerInfo, TokenLogprobs,
                        TopLogprob)

_FINISH_REASONS: Dict[int, FinishReason] = {
    pb.FINISH_REASON_LENGTH: FinishReason.LENGTH,
    pb.FINISH_REASON_STOP: FinishReason.STOP,
    pb.FINISH_REASON_CANCELLED: FinishReason.CANCELLED,
}


def _same_named_fields(cls: type, message: Any, *, skip: Tuple[str, ...] = ()) -> Dict[str, Any]:
    """The values of `message`'s fields named like the dataclass `cls`'s fields (but `skip`)."""
    return {f.name: getattr(message, f.name) for f in dataclasses.fields(cls) if f.name not in skip}


def checkpoint_stats(message: Any) -> CheckpointStats:
    """pb.CheckpointStats → CheckpointStats."""
    return CheckpointStats(**_same_named_fields(CheckpointStats, message))


def token_logprobs(message: Any) -> TokenLogprobs:
    """pb.TokenLogprobs → TokenLogprobs."""
    top = [TopLogprob(token_id=t.token_id, logprob=t.logprob) for t in message.top]
    return TokenLogprobs(token_id=message.token_id, logprob=message.logprob, top=top)


def chunk(response: Any) -> Chunk:
    """pb.GenerateResponse → Chunk (its `complete`, if any, goes through completion())."""
    logprobs: List[TokenLogprobs] = [token_logprobs(lp) for lp in response.logprobs]
    return Chunk(request_id=response.request_id, token_ids=list(response.token_ids), text=response.text,
                 generated_tokens=response.generated_tokens, logprobs=logprobs)


def completion(request_id: str, done: Any) -> Completion:
    """pb.Completion (of the stream of `request_id`) → Completion."""
    return Completion(
        request_id=request_id,
        finish_reason=_FINISH_REASONS.get(done.finish_reason, FinishReason.UNSPECIFIED),
        prompt_tokens=done.prompt_tokens,
        cached_prompt_tokens=done.cached_prompt_tokens,
        generated_tokens=done.generated_tokens,
        ttft=done.time_to_first_token_seconds if done.generated_tokens > 0 else None,
        e2e=done.e2e_seconds,
        stop_string=done.stop_string or None,
        stop_token_id=done.stop_token_id if done.HasField("stop_token_id") else None,
        checkpoints=checkpoint_stats(done.checkpoints),
    )


def model_info(message: Any) -> ModelInfo:
    """pb.ModelInfo → ModelInfo."""
    return ModelInfo(**_same_named_fields(ModelInfo, message))


def server_info(message: Any) -> ServerInfo:
    """pb.ServerInfo → ServerInfo."""
    return ServerInfo(**_same_named_fields(ServerInfo, message, skip=("checkpoints",)),
                      checkpoints=checkpoint_stats(message.checkpoints))
