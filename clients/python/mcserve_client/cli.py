"""mcserve-client: the command line for mcserve's gRPC API (run: python3 -m mcserve_client.cli --help)."""
from __future__ import annotations

import argparse
import os
import sys
from typing import Callable, Dict, List, Optional, Sequence, TextIO

import grpc

from . import cli_output
from .client import Client
from .datatypes import Completion, HealthStatus
from .errors import McserveError
from .request import Prompt

PROG = "mcserve-client"
DEFAULT_ADDRESS = "localhost:8001"

# Exit codes: one per failure class.
EXIT_OK = 0
EXIT_FAILED = 1  # any other gRPC error; `health` not SERVING
EXIT_USAGE = 2  # bad flags or local files (argparse's code)
EXIT_REFUSED = 3  # the request was refused: INVALID_ARGUMENT, NOT_FOUND, ...
EXIT_UNAUTHENTICATED = 4  # missing or wrong API key
EXIT_UNAVAILABLE = 5  # server unreachable, busy, or the deadline passed

_EXIT_BY_CODE: Dict[grpc.StatusCode, int] = {
    grpc.StatusCode.INVALID_ARGUMENT: EXIT_REFUSED, grpc.StatusCode.OUT_OF_RANGE: EXIT_REFUSED,
    grpc.StatusCode.NOT_FOUND: EXIT_REFUSED, grpc.StatusCode.ALREADY_EXISTS: EXIT_REFUSED,
    grpc.StatusCode.FAILED_PRECONDITION: EXIT_REFUSED,
    grpc.StatusCode.UNAUTHENTICATED: EXIT_UNAUTHENTICATED, grpc.StatusCode.PERMISSION_DENIED: EXIT_UNAUTHENTICATED,
    grpc.StatusCode.UNAVAILABLE: EXIT_UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED: EXIT_UNAVAILABLE,
    grpc.StatusCode.RESOURCE_EXHAUSTED: EXIT_UNAVAILABLE,
}


def _positive_float(text: str) -> float:
    value = float(text)
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be > 0, got {text}")
    return value


def _int_list(text: str) -> List[int]:
    """"1,2 3" → [1, 2, 3]."""
    try:
        return [int(t) for t in text.replace(",", " ").split()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected integers separated by commas or spaces, got {text!r}") from None


def _logit_bias(text: str) -> Dict[int, float]:
    """"ID=BIAS" → {ID: BIAS}."""
    token, sep, bias = text.partition("=")
    try:
        if sep:
            return {int(token): float(bias)}
    except ValueError:
        pass
    raise argparse.ArgumentTypeError(f"expected TOKEN_ID=BIAS, got {text!r}")


def _add_connection_options(parser: argparse.ArgumentParser, after_verb: bool) -> None:
    """--address etc.; accepted before the verb (with defaults) and after it (overriding them)."""
    def default(value: object) -> object:
        return argparse.SUPPRESS if after_verb else value
    g = parser.add_argument_group("connection")
    g.add_argument("--address", default=default(os.environ.get("MCSERVE_ADDRESS", DEFAULT_ADDRESS)),
                   help=f"server HOST:PORT (env MCSERVE_ADDRESS; default {DEFAULT_ADDRESS})")
    g.add_argument("--api-key", default=default(os.environ.get("MCSERVE_API_KEY")),
                   help="sent as `authorization: Bearer KEY` (env MCSERVE_API_KEY)")
    g.add_argument("--tls-ca", default=default(None), metavar="PEM", help="use TLS, verifying the server against this CA")
    g.add_argument("--tls-cert", default=default(None), metavar="PEM", help="client certificate (mutual TLS)")
    g.add_argument("--tls-key", default=default(None), metavar="PEM", help="client private key (mutual TLS)")
    g.add_argument("--tls-server-name", default=default(None), metavar="NAME",
                   help="expect this name in the server's certificate instead of the address's host")
    g.add_argument("--timeout", type=_positive_float, default=default(None), metavar="SECONDS",
                   help="deadline of each call (default: none)")
    g.add_argument("--json", action="store_true", default=default(False), help="print JSON (one object per line)")


def _add_generation_options(parser: argparse.ArgumentParser) -> None:
    """The prompt and every sampling/stop field of GenerateRequest (unset = the server's default)."""
    parser.add_argument("prompt", metavar="PROMPT", help="the prompt text (or token ids with --token-ids)")
    parser.add_argument("--token-ids", action="store_true", help="PROMPT is token ids (\"1,2,3\"), used as given")
    parser.add_argument("--request-id", default="", help="client-chosen id, usable with `abort`")
    s = parser.add_argument_group("sampling (vLLM semantics)")
    s.add_argument("--temperature", type=float, help="default 1; 0 = greedy")
    s.add_argument("--top-p", type=float, help="default 1; in (0, 1]")
    s.add_argument("--top-k", type=int, default=0, help="0 or -1 = all tokens")
    s.add_argument("--min-p", type=float, default=0.0, help="in [0, 1]")
    s.add_argument("--repetition-penalty", type=float, help="default 1; > 0")
    s.add_argument("--presence-penalty", type=float, default=0.0, help="in [-2, 2]")
    s.add_argument("--frequency-penalty", type=float, default=0.0, help="in [-2, 2]")
    s.add_argument("--logit-bias", type=_logit_bias, action="append", default=[], metavar="ID=BIAS",
                   help="add BIAS to token ID's logit (repeatable)")
    s.add_argument("--seed", type=int, help="reproducible draws")
    s.add_argument("--logprobs", type=int, default=0, metavar="N", help="top-N log-probabilities per token (--json)")
    t = parser.add_argument_group("stopping")
    t.add_argument("--max-tokens", type=int, help="default 16")
    t.add_argument("--min-tokens", type=int, default=0, help="EOS and stop ids are banned until this many")
    t.add_argument("--stop", action="append", default=[], metavar="STRING", help="stop string (repeatable)")
    t.add_argument("--stop-token-ids", type=_int_list, action="extend", default=[], metavar="IDS",
                   help="stop token ids, comma separated (repeatable)")
    t.add_argument("--ignore-eos", action="store_true", help="do not stop at EOS")
    t.add_argument("--include-stop-str-in-output", action="store_true", help="keep the matched stop string")
    t.add_argument("--quiet", "-q", action="store_true", help="no summary line on stderr")


def build_parser() -> argparse.ArgumentParser:
    """The whole command line: connection options, then a verb and its arguments."""
    parser = argparse.ArgumentParser(prog=PROG, description="Client for mcserve's gRPC API (mcserve.v1.Generation).",
                                     epilog="Exit codes: 0 ok, 1 other error or not serving, 2 usage, "
                                            "3 request refused, 4 unauthenticated, 5 unavailable or timed out.")
    _add_connection_options(parser, after_verb=False)
    verbs = parser.add_subparsers(dest="verb", required=True, metavar="VERB")

    def verb(name: str, help: str) -> argparse.ArgumentParser:
        sub = verbs.add_parser(name, help=help, description=help)
        _add_connection_options(sub, after_verb=True)
        return sub

    _add_generation_options(verb("stream", "print the generated text as it arrives"))
    _add_generation_options(verb("generate", "print the whole generated text"))
    verb("abort", "abort a running request").add_argument("request_id", metavar="ID")
    tokenize = verb("tokenize", "print the token ids of TEXT")
    tokenize.add_argument("text", metavar="TEXT")
    tokenize.add_argument("--add-bos", action="store_true", help="put the BOS token first")
    verb("info", "print the served model's info")
    verb("server-info", "print the server's version, uptime and counters")
    verb("health", "print the health status (exit 1 unless SERVING)")
    return parser


def _client(args: argparse.Namespace) -> Client:
    return Client(args.address, api_key=args.api_key, root_certificates=args.tls_ca, client_cert=args.tls_cert,
                  client_key=args.tls_key, server_name=args.tls_server_name, timeout=args.timeout)


def _stream(client: Client, args: argparse.Namespace, out: TextIO) -> int:
    """Prints text as it arrives (or one JSON object per chunk, then {"complete": ...})."""
    with client.stream(_prompt(args), **_generation_kwargs(args)) as stream:
        for item in stream:
            if isinstance(item, Completion):
                out.write(cli_output.to_json({"complete": cli_output.plain(item)}) + "\n" if args.json else "\n")
                out.flush()
                _print_summary(args, item)
            elif args.json:
                out.write(cli_output.to_json(item) + "\n")
            else:
                out.write(item.text)
                out.flush()
    return EXIT_OK


def _generate(client: Client, args: argparse.Namespace, out: TextIO) -> int:
    """Prints the whole text (or the Result as JSON)."""
    result = client.generate(_prompt(args), **_generation_kwargs(args))
    print(cli_output.to_json(result) if args.json else result.text, file=out)
    _print_summary(args, result.completion)
    return EXIT_OK


def _prompt(args: argparse.Namespace) -> Prompt:
    if not args.token_ids:
        return str(args.prompt)
    try:
        return _int_list(args.prompt)
    except argparse.ArgumentTypeError as error:
        raise McserveError(grpc.StatusCode.INVALID_ARGUMENT, f"prompt: {error}") from None


def _generation_kwargs(args: argparse.Namespace) -> Dict[str, object]:
    """stream()'s keyword arguments from the generation options."""
    logit_bias: Dict[int, float] = {}
    for entry in args.logit_bias:
        logit_bias.update(entry)
    return dict(max_tokens=args.max_tokens, min_tokens=args.min_tokens, temperature=args.temperature,
                top_p=args.top_p, top_k=args.top_k, min_p=args.min_p, repetition_penalty=args.repetition_penalty,
                presence_penalty=args.presence_penalty, frequency_penalty=args.frequency_penalty,
                logit_bias=logit_bias, seed=args.seed, stop=args.stop, stop_token_ids=args.stop_token_ids,
                ignore_eos=args.ignore_eos, include_stop_str_in_output=args.include_stop_str_in_output,
                logprobs=args.logprobs, request_id=args.request_id)


def _print_summary(args: argparse.Namespace, done: Completion) -> None:
    if not args.quiet:
        print(cli_output.summary(done), file=sys.stderr)


def _abort(client: Client, args: argparse.Namespace, out: TextIO) -> int:
    client.abort(args.request_id)
    print(cli_output.to_json({"aborted": args.request_id}) if args.json else f"aborted {args.request_id}", file=out)
    return EXIT_OK


def _tokenize(client: Client, args: argparse.Namespace, out: TextIO) -> int:
    ids = client.tokenize(args.text, add_bos=args.add_bos)
    print(cli_output.to_json({"token_ids": ids}) if args.json else cli_output.token_list(ids), file=out)
    return EXIT_OK


def _print_record(args: argparse.Namespace, record: object, out: TextIO) -> None:
    if args.json:
        print(cli_output.to_json(record), file=out)
    else:
        cli_output.print_fields(record, out)


def _info(client: Client, args: argparse.Namespace, out: TextIO) -> int:
    _print_record(args, client.model_info(), out)
    return EXIT_OK


def _server_info(client: Client, args: argparse.Namespace, out: TextIO) -> int:
    _print_record(args, client.server_info(), out)
    return EXIT_OK


def _health(client: Client, args: argparse.Namespace, out: TextIO) -> int:
    status = client.health()
    print(cli_output.to_json({"status": status.value}) if args.json else status.value, file=out)
    return EXIT_OK if status == HealthStatus.SERVING else EXIT_FAILED


_VERBS: Dict[str, Callable[[Client, argparse.Namespace, TextIO], int]] = {
    "stream": _stream, "generate": _generate, "abort": _abort, "tokenize": _tokenize, "info": _info,
    "server-info": _server_info, "health": _health,
}


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Runs one verb; returns the exit code. Errors: `mcserve-client: CODE: message` on stderr."""
    args = build_parser().parse_args(argv)
    if hasattr(sys.stdout, "reconfigure"):
        sys.stdout.reconfigure(encoding="utf-8")  # the server's text is UTF-8, whatever the locale
    try:
        with _client(args) as client:
            return _VERBS[args.verb](client, args, sys.stdout)
    except McserveError as error:
        print(f"{PROG}: {error.code_name}: {error.message}", file=sys.stderr)
        return _EXIT_BY_CODE.get(error.code, EXIT_FAILED)
    except OSError as error:  # unreadable TLS files
        print(f"{PROG}: {error.strerror or error}", file=sys.stderr)
        return EXIT_USAGE
    except ValueError as error:  # inconsistent TLS options
        print(f"{PROG}: {error}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
