"""mcserve_client: a typed Python client for mcserve's gRPC API (proto/mcserve/v1/generation.proto)."""
from .client import Client
from .datatypes import (CheckpointStats, Chunk, Completion, FinishReason, HealthStatus, ModelInfo, Result,
                        ServerInfo, TokenLogprobs, TopLogprob)
from .errors import McserveError
from .stream import Stream

__all__ = ["CheckpointStats", "Chunk", "Client", "Completion", "FinishReason", "HealthStatus", "McserveError",
           "ModelInfo", "Result", "ServerInfo", "Stream", "TokenLogprobs", "TopLogprob"]
__version__ = "0.1.0"
