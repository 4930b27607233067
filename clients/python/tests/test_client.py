"""mcserve_client.Client against a real mcserve: streaming, finish reasons, abort, tokenize, infos, errors."""
from __future__ import annotations

import dataclasses
import time

import grpc
import pytest
from conftest import FIXTURE, LIMIT, PROMPT, fixture_config

from mcserve.v1 import generation_pb2 as pb
from mcserve_client import (CheckpointStats, Chunk, Client, Completion, FinishReason, HealthStatus, McserveError,
                            ModelInfo, ServerInfo)


@pytest.fixture(scope="module")
def client(server):
    with Client(server.address, timeout=30) as c:
        yield c


def long_stream(client: Client, **kwargs):
    """A sampled request that runs for seconds unless aborted."""
    return client.stream(PROMPT, temperature=0.8, seed=1, max_tokens=LIMIT, ignore_eos=True, **kwargs)


def test_stream_concatenates_to_generate_and_greedy_repeats(client):
    items = list(client.stream(PROMPT, temperature=0, max_tokens=24))
    first, chunks, done = items[0], items[:-1], items[-1]
    assert isinstance(first, Chunk) and first.request_id and first.token_ids == [] and first.text == ""
    assert all(isinstance(c, Chunk) and c.request_id == first.request_id for c in chunks)
    assert isinstance(done, Completion) and done.request_id == first.request_id
    tokens = [t for c in chunks for t in c.token_ids]
    assert done.finish_reason == FinishReason.LENGTH == "length"
    assert done.generated_tokens == len(tokens) == chunks[-1].generated_tokens == 24
    assert done.prompt_tokens == len(client.tokenize(PROMPT, add_bos=True))
    assert done.ttft is not None and 0 < done.ttft <= done.e2e

    result = client.generate(PROMPT, temperature=0, max_tokens=24)
    assert result.text == "".join(c.text for c in chunks) and result.token_ids == tokens
    assert result.request_id != first.request_id and result.finish_reason == FinishReason.LENGTH
    again = client.generate(PROMPT, temperature=0, max_tokens=24)
    assert (again.text, again.token_ids) == (result.text, result.token_ids)


def test_token_id_prompt_equals_text_prompt(client):
    ids = client.tokenize(PROMPT, add_bos=True)
    assert ids[0] == client.model_info().bos_token_id and client.tokenize(PROMPT) == ids[1:]
    by_ids = client.generate(ids, temperature=0, max_tokens=12)
    by_text = client.generate(PROMPT, temperature=0, max_tokens=12)
    assert by_ids.token_ids == by_text.token_ids and by_ids.completion.prompt_tokens == len(ids)


def test_stop_string_ends_with_stop(client):
    full = client.generate(PROMPT, temperature=0, max_tokens=24, ignore_eos=True).text
    stop = next(full[i:i + 2] for i in range(4, len(full) - 1) if "\ufffd" not in full[i:i + 2])
    cut = full.index(stop)
    result = client.generate(PROMPT, temperature=0, max_tokens=24, ignore_eos=True, stop=[stop, "never seen"])
    assert result.finish_reason == FinishReason.STOP and result.completion.stop_string == stop
    assert result.text == full[:cut] and result.completion.stop_token_id is None
    kept = client.generate(PROMPT, temperature=0, max_tokens=24, ignore_eos=True, stop=stop,
                           include_stop_str_in_output=True)
    assert kept.text == full[:cut + len(stop)]


def test_stop_token_id_ends_with_stop(client):
    tokens = client.generate(PROMPT, temperature=0, max_tokens=24, ignore_eos=True).token_ids
    stop_id = tokens[4]
    end = tokens.index(stop_id) + 1
    result = client.generate(PROMPT, temperature=0, max_tokens=24, ignore_eos=True, stop_token_ids=[stop_id])
    assert result.finish_reason == FinishReason.STOP and result.completion.stop_token_id == stop_id
    assert result.token_ids == tokens[:end] and result.completion.stop_string is None


def test_logit_bias_and_logprobs_reach_the_server(client):
    biased = client.generate(PROMPT, temperature=0, max_tokens=5, ignore_eos=True, logit_bias={42: 100.0})
    assert biased.token_ids == [42] * 5
    result = client.generate(PROMPT, temperature=0, max_tokens=6, logprobs=3)
    assert [lp.token_id for lp in result.logprobs] == result.token_ids
    for lp in result.logprobs:  # greedy: the chosen token is the most likely one
        assert len(lp.top) == 3 and lp.top[0].token_id == lp.token_id and lp.logprob == lp.top[0].logprob <= 0


def test_every_sampling_field_is_accepted_and_seeded_draws_repeat(client):
    kwargs = dict(temperature=0.9, top_p=0.95, top_k=40, min_p=0.01, repetition_penalty=1.1, presence_penalty=0.2,
                  frequency_penalty=0.2, seed=123, min_tokens=4, max_tokens=12)
    first = client.generate(PROMPT, **kwargs)
    assert first.completion.generated_tokens >= 4
    assert client.generate(PROMPT, **kwargs).token_ids == first.token_ids


def test_abort_by_request_id_ends_the_stream_cancelled(client):
    stream = long_stream(client, request_id="abort-me")
    first = next(stream)
    assert first.request_id == stream.request_id == "abort-me"
    client.abort("abort-me")
    rest = list(stream)
    done = rest[-1]
    assert isinstance(done, Completion) and done.finish_reason == FinishReason.CANCELLED
    assert done.generated_tokens < LIMIT
    with pytest.raises(McserveError) as error:  # finished: no longer known
        client.abort("abort-me")
    # (The message names "abort-me", or the engine's numeric id while the server unregisters the stream.)
    assert error.value.code == grpc.StatusCode.NOT_FOUND


def test_leaving_a_stream_early_cancels_it(client):
    before = client.server_info().finished_cancelled
    with long_stream(client) as stream:
        next(stream)
        next(stream)
    with pytest.raises(McserveError) as error:
        next(stream)
    assert error.value.code == grpc.StatusCode.CANCELLED
    deadline = time.monotonic() + 10
    while client.server_info().finished_cancelled == before:  # the server aborted the request
        assert time.monotonic() < deadline
        time.sleep(0.05)


def test_deadline_becomes_deadline_exceeded(server):
    with Client(server.address, timeout=0.3) as short:
        with pytest.raises(McserveError) as error:
            long_stream(short).collect()
    assert error.value.code == grpc.StatusCode.DEADLINE_EXCEEDED


@pytest.mark.parametrize("kwargs, field", [
    (dict(top_p=1.5), "top_p"),
    (dict(temperature=-1.0), "temperature"),
    (dict(max_tokens=LIMIT + 1), "max_tokens"),
    (dict(logprobs=21), "logprobs"),
    (dict(stop_token_ids=[10**6]), "stop_token_ids[0]"),
    (dict(stop=[""]), "stop_strings[0]"),
])
def test_bad_request_is_invalid_argument_naming_the_field(client, kwargs, field):
    with pytest.raises(McserveError) as error:
        client.generate(PROMPT, **kwargs)
    assert error.value.code == grpc.StatusCode.INVALID_ARGUMENT and field in error.value.message
    assert str(error.value).startswith("INVALID_ARGUMENT: ")


@pytest.mark.parametrize("prompt, kwargs, field", [
    ("", {}, "text"),
    ([], {}, "token_ids"),
    ([1, "a"], {}, "prompt[1]"),
    (b"bytes", {}, "prompt"),
    (PROMPT, dict(max_tokens=-1), "max_tokens"),
    (PROMPT, dict(seed=2**64), "seed"),
    (PROMPT, dict(temperature="hot"), "temperature"),
    (PROMPT, dict(stop_token_ids=[1.5]), "stop_token_ids[0]"),
    (PROMPT, dict(stop=[3]), "stop[0]"),
    (PROMPT, dict(request_id=7), "request_id"),
])
def test_ill_typed_arguments_are_refused_by_field(client, prompt, kwargs, field):
    with pytest.raises(McserveError) as error:
        client.generate(prompt, **kwargs)
    assert error.value.code == grpc.StatusCode.INVALID_ARGUMENT and field in error.value.message


def test_model_info_describes_the_fixture(client):
    info, config = client.model_info(), fixture_config()
    assert isinstance(info, ModelInfo) and info.model_path == str(FIXTURE)
    assert info.family == "gated_deltanet" and info.model_type == config["model_type"]
    assert (info.num_layers, info.hidden_size, info.vocab_size) == (
        config["num_hidden_layers"], config["hidden_size"], config["vocab_size"])
    assert info.max_tokens_limit == LIMIT and info.num_slots == info.max_running_requests > 0
    assert info.memory_caching == "" and info.mc_segment_size == 0


def test_server_info_counts_requests(client):
    before = client.server_info()
    client.generate(PROMPT, temperature=0, max_tokens=3, ignore_eos=True)
    after = client.server_info()
    assert isinstance(after, ServerInfo) and isinstance(after.checkpoints, CheckpointStats)
    assert after.version and after.serving and after.slots_total == client.model_info().num_slots
    assert after.finished_length == before.finished_length + 1
    assert after.tokens_generated >= before.tokens_generated + 3 and after.uptime_seconds > before.uptime_seconds


def test_health_is_serving(client):
    assert client.health() == HealthStatus.SERVING
    with pytest.raises(McserveError) as error:
        client.health("no.such.Service")
    assert error.value.code == grpc.StatusCode.NOT_FOUND


def test_dataclasses_cover_every_proto_field():
    def names(cls):
        return {f.name for f in dataclasses.fields(cls)}

    def proto(message):
        return {f.name for f in message.DESCRIPTOR.fields}

    assert names(ModelInfo) == proto(pb.ModelInfo)
    assert names(ServerInfo) == proto(pb.ServerInfo)
    assert names(CheckpointStats) == proto(pb.CheckpointStats)
    renamed = {"time_to_first_token_seconds": "ttft", "e2e_seconds": "e2e"}
    assert names(Completion) == {renamed.get(n, n) for n in proto(pb.Completion)} | {"request_id"}
    assert names(Chunk) == proto(pb.GenerateResponse) - {"complete"}


def test_unreachable_server_is_unavailable():
    with Client("127.0.0.1:1", timeout=5) as nowhere:
        with pytest.raises(McserveError) as error:
            nowhere.model_info()
    assert error.value.code == grpc.StatusCode.UNAVAILABLE
