"""Builds a pb.GenerateRequest from the client's keyword arguments, refusing ill-typed values by field name."""
from __future__ import annotations

import numbers
from typing import Any, Iterable, Mapping, Optional, Sequence, Union

from ._stubs import pb
from .errors import invalid_argument

Prompt = Union[str, Sequence[int]]

_INT32 = (-(2**31), 2**31 - 1)
_UINT32 = (0, 2**32 - 1)
_UINT64 = (0, 2**64 - 1)


def _integer(name: str, value: Any, bounds: tuple) -> int:
    """`value` as an int within `bounds`, or INVALID_ARGUMENT naming `name`."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise invalid_argument(f"{name}: expected an integer, got {value!r}")
    if not bounds[0] <= int(value) <= bounds[1]:
        raise invalid_argument(f"{name}: {value} is outside [{bounds[0]}, {bounds[1]}]")
    return int(value)


def _real(name: str, value: Any) -> float:
    """`value` as a float, or INVALID_ARGUMENT naming `name` (range checks are the server's)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise invalid_argument(f"{name}: expected a number, got {value!r}")
    return float(value)


def _integers(name: str, values: Iterable[Any], bounds: tuple) -> list:
    """Every element through _integer, named `name[i]`."""
    if isinstance(values, (str, bytes)):
        raise invalid_argument(f"{name}: expected a list of integers, got {values!r}")
    return [_integer(f"{name}[{i}]", v, bounds) for i, v in enumerate(values)]


def _strings(name: str, values: Union[str, Iterable[str]]) -> list:
    """A string or a list of strings → list of strings (a single string is one element)."""
    items = [values] if isinstance(values, str) else list(values)
    for i, v in enumerate(items):
        if not isinstance(v, str):
            raise invalid_argument(f"{name}[{i}]: expected a string, got {v!r}")
    return items


def set_prompt(request: Any, prompt: Prompt) -> None:
    """Text (tokenized by the server, BOS first) or token ids (used as given)."""
    if isinstance(prompt, str):
        request.text = prompt
    elif isinstance(prompt, (bytes, bytearray)):
        raise invalid_argument("prompt: expected str or a list of token ids, got bytes (decode it first)")
    else:
        request.token_ids.ids.extend(_integers("prompt", prompt, _INT32))


def generate_request(
    prompt: Prompt, *, request_id: str = "",
    max_tokens: Optional[int] = None, min_tokens: int = 0,
    temperature: Optional[float] = None, top_p: Optional[float] = None, top_k: int = 0, min_p: float = 0.0,
    repetition_penalty: Optional[float] = None, presence_penalty: float = 0.0, frequency_penalty: float = 0.0,
    logit_bias: Optional[Mapping[int, float]] = None, seed: Optional[int] = None,
    stop: Union[str, Sequence[str]] = (), stop_token_ids: Sequence[int] = (), ignore_eos: bool = False,
    include_stop_str_in_output: bool = False, logprobs: int = 0,
) -> Any:
    """A pb.GenerateRequest; None leaves an optional field unset (the server's default)."""
    if not isinstance(request_id, str):
        raise invalid_argument(f"request_id: expected a string, got {request_id!r}")
    request = pb.GenerateRequest(request_id=request_id)
    set_prompt(request, prompt)
    s = request.sampling
    if temperature is not None:
        s.temperature = _real("temperature", temperature)
    if top_p is not None:
        s.top_p = _real("top_p", top_p)
    s.top_k = _integer("top_k", top_k, _INT32)
    s.min_p = _real("min_p", min_p)
    if repetition_penalty is not None:
        s.repetition_penalty = _real("repetition_penalty", repetition_penalty)
    s.presence_penalty = _real("presence_penalty", presence_penalty)
    s.frequency_penalty = _real("frequency_penalty", frequency_penalty)
    for token, bias in (logit_bias or {}).items():
        s.logit_bias[_integer("logit_bias key", token, _INT32)] = _real(f"logit_bias[{token}]", bias)
    if seed is not None:
        s.seed = _integer("seed", seed, _UINT64)
    p = request.stop
    if max_tokens is not None:
        p.max_tokens = _integer("max_tokens", max_tokens, _UINT32)
    p.min_tokens = _integer("min_tokens", min_tokens, _UINT32)
    p.stop_token_ids.extend(_integers("stop_token_ids", stop_token_ids, _INT32))
    p.stop.extend(_strings("stop", stop))
    p.ignore_eos = bool(ignore_eos)
    p.include_stop_str_in_output = bool(include_stop_str_in_output)
    request.logprobs = _integer("logprobs", logprobs, _UINT32)
    return request
