"""What the client returns: plain dataclasses mirroring proto/mcserve/v1/generation.proto (no protobufs)."""
from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import List, Optional


class FinishReason(str, enum.Enum):
    """Why a request ended (compares equal to its string value)."""

    LENGTH = "length"  # max_tokens reached
    STOP = "stop"  # EOS, a stop token id or a stop string
    CANCELLED = "cancelled"  # Abort, the call cancelled, or the server shutting down
    UNSPECIFIED = "unspecified"  # the server did not say (not sent by mcserve)


class HealthStatus(str, enum.Enum):
    """grpc.health.v1 serving status of the server (or of one service)."""

    UNKNOWN = "UNKNOWN"
    SERVING = "SERVING"
    NOT_SERVING = "NOT_SERVING"
    SERVICE_UNKNOWN = "SERVICE_UNKNOWN"


@dataclass(frozen=True)
class TopLogprob:
    """One of the top-n alternatives at a generated position."""

    token_id: int
    logprob: float


@dataclass(frozen=True)
class TokenLogprobs:
    """The log-probability of one generated token and its top-n alternatives."""

    token_id: int
    logprob: float
    top: List[TopLogprob] = field(default_factory=list)


@dataclass(frozen=True)
class CheckpointStats:
    """Server-wide checkpoint-store and prefix-cache counters (Memory Caching)."""

    device_pages: int = 0
    host_pages: int = 0
    referenced_pages: int = 0
    stagings: int = 0
    prefix_hits: int = 0
    prefix_misses: int = 0
    prefix_cached_tokens: int = 0
    evictions: int = 0


@dataclass(frozen=True)
class Chunk:
    """One streamed response: new tokens and text (the first chunk carries only the request id)."""

    request_id: str
    token_ids: List[int]
    text: str
    generated_tokens: int  # cumulative
    logprobs: List[TokenLogprobs]  # one per token when the request asked for logprobs


@dataclass(frozen=True)
class Completion:
    """How a request ended; the last item of a stream."""

    request_id: str
    finish_reason: FinishReason
    prompt_tokens: int
    cached_prompt_tokens: int  # resumed from the prefix cache
    generated_tokens: int
    ttft: Optional[float]  # seconds from the server receiving the call to the first token; None if none
    e2e: float  # seconds from the server receiving the call to the end
    stop_string: Optional[str]  # the stop string matched, if any
    stop_token_id: Optional[int]  # the EOS / stop token id matched, if any
    checkpoints: CheckpointStats


@dataclass(frozen=True)
class Result:
    """A whole generation: the concatenated stream and its completion."""

    request_id: str
    text: str
    token_ids: List[int]
    logprobs: List[TokenLogprobs]
    completion: Completion

    @property
    def finish_reason(self) -> FinishReason:
        """Shortcut for completion.finish_reason."""
        return self.completion.finish_reason


@dataclass(frozen=True)
class ModelInfo:
    """The served model and the server's capacity."""

    model_path: str
    family: str  # gated_deltanet, delta_net, gla, linear_attn, swla, titans
    model_type: str  # as in config.json
    num_layers: int
    hidden_size: int
    vocab_size: int
    memory_caching: str  # the MC configuration, "" when off
    mc_segment_size: int  # 0 when MC is off
    num_slots: int
    max_running_requests: int
    max_prompt_tokens: int
    max_tokens_limit: int
    bos_token_id: int
    eos_token_id: int


@dataclass(frozen=True)
class ServerInfo:
    """Version, uptime and a snapshot of the engine's counters."""

    version: str
    uptime_seconds: float
    slots_total: int
    slots_used: int
    waiting: int
    running: int
    steps: int
    tokens_generated: int
    prompt_tokens_processed: int
    prompt_tokens_cached: int
    finished_length: int
    finished_stop: int
    finished_cancelled: int
    finished_error: int
    checkpoints: CheckpointStats
    serving: bool  # False once shutdown began
