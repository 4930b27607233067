"""mcserve numerical reference (plain PyTorch, token-by-token recurrences)."""
from .model import CausalLM, resolve_config  # noqa: F401
from . import ops, safetensors_io  # noqa: F401
