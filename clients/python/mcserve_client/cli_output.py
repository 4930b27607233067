"""How the mcserve-client CLI prints results: human-readable lines, or JSON (--json)."""
from __future__ import annotations

import dataclasses
import enum
import json
from typing import Any, Iterable, TextIO

from .datatypes import Completion


def to_json(value: Any) -> str:
    """One line of JSON for a dataclass (enums as their values), a dict or a list."""
    plain = dataclasses.asdict(value) if dataclasses.is_dataclass(value) else value
    return json.dumps(plain, ensure_ascii=False, default=lambda v: v.value if isinstance(v, enum.Enum) else str(v))


def print_fields(value: Any, out: TextIO, prefix: str = "") -> None:
    """`name: value` lines for a dataclass's fields, nested dataclasses as `outer.inner: value`."""
    for field in dataclasses.fields(value):
        item = getattr(value, field.name)
        if dataclasses.is_dataclass(item):
            print_fields(item, out, prefix=f"{prefix}{field.name}.")
        else:
            shown = item.value if isinstance(item, enum.Enum) else item
            print(f"{prefix}{field.name}: {shown}", file=out)


def summary(done: Completion) -> str:
    """One line about how a generation ended (for stderr)."""
    parts = [f"finish_reason={done.finish_reason.value}"]
    if done.stop_string is not None:
        parts.append(f"stop_string={done.stop_string!r}")
    if done.stop_token_id is not None:
        parts.append(f"stop_token_id={done.stop_token_id}")
    parts += [f"prompt_tokens={done.prompt_tokens}", f"cached_prompt_tokens={done.cached_prompt_tokens}",
              f"generated_tokens={done.generated_tokens}"]
    if done.ttft is not None:
        parts.append(f"ttft={done.ttft:.3f}s")
    parts.append(f"e2e={done.e2e:.3f}s")
    parts.append(f"request_id={done.request_id}")
    return " ".join(parts)


def token_list(ids: Iterable[int]) -> str:
    """Token ids separated by spaces."""
    return " ".join(str(i) for i in ids)


def plain(value: Any) -> Any:
    """A dataclass as nested dicts and lists (for embedding in a larger JSON object)."""
    return dataclasses.asdict(value)
