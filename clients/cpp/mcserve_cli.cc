// mcserve-cli: a command-line client of mcserve's gRPC API (mcserve.v1.Generation + health).
//   mcserve-cli [flags] stream PROMPT | generate PROMPT | abort ID | tokenize TEXT | info | server-info | health
// Errors print `mcserve-cli: CODE: message` on stderr and exit 1 (2 for a bad command line).
#include <grpc/support/log.h>
#include <pthread.h>
#include <signal.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/flags/usage_config.h"
#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"
#include "clients/cpp/call_canceller.h"
#include "clients/cpp/cli_args.h"
#include "clients/cpp/cli_output.h"
#include "clients/cpp/cli_request.h"
#include "clients/cpp/generation_client.h"

// Connection.
ABSL_FLAG(std::string, address, "localhost:8001", "Server's gRPC address HOST:PORT (env MCSERVE_ADDRESS)");
ABSL_FLAG(std::string, api_key, "", "API key, sent as `authorization: Bearer KEY` (env MCSERVE_API_KEY)");
ABSL_FLAG(bool, tls, false, "Use TLS (implied by --tls-ca/--tls-cert/--tls-key); without --tls-ca: the system's roots");
ABSL_FLAG(std::string, tls_ca, "", "PEM CA bundle that signs the server's certificate");
ABSL_FLAG(std::string, tls_cert, "", "PEM client certificate chain, for mutual TLS (with --tls-key)");
ABSL_FLAG(std::string, tls_key, "", "PEM private key of --tls-cert");
ABSL_FLAG(std::string, tls_server_name, "", "Name to verify the server's certificate against (default: the host)");
ABSL_FLAG(absl::Duration, timeout, absl::InfiniteDuration(), "Deadline of the call, e.g. 30s or 2m; inf = none");
ABSL_FLAG(bool, json, false, "Machine-readable output: proto3 JSON (stream: one object per response)");
// Prompt and request.
ABSL_FLAG(std::string, request_id, "", "Client-chosen request id (unique among requests in flight; for abort)");
ABSL_FLAG(std::vector<std::string>, token_ids, {}, "Prompt as token ids instead of PROMPT text (comma list or repeated)");
// SamplingParams (vLLM semantics; unset = the server's default).
ABSL_FLAG(std::optional<double>, temperature, std::nullopt, "Sampling temperature (default 1); 0 = greedy");
ABSL_FLAG(std::optional<double>, top_p, std::nullopt, "Nucleus sampling mass in (0, 1] (default 1)");
ABSL_FLAG(int64_t, top_k, 0, "Keep the k most likely tokens; 0 or -1 = all");
ABSL_FLAG(double, min_p, 0, "Drop tokens below min_p × the top probability, in [0, 1]");
ABSL_FLAG(std::optional<double>, repetition_penalty, std::nullopt, "Repetition penalty > 0 (default 1)");
ABSL_FLAG(double, presence_penalty, 0, "Presence penalty in [-2, 2]");
ABSL_FLAG(double, frequency_penalty, 0, "Frequency penalty in [-2, 2]");
ABSL_FLAG(std::vector<std::string>, logit_bias, {}, "TOKEN_ID:BIAS added to that token's logit (comma list or repeated)");
ABSL_FLAG(std::optional<uint64_t>, seed, std::nullopt, "Seed for reproducible sampling");
// StopParams.
ABSL_FLAG(std::optional<int64_t>, max_tokens, std::nullopt, "Most tokens to generate (default 16)");
ABSL_FLAG(int64_t, min_tokens, 0, "EOS and stop ids are banned until this many tokens");
ABSL_FLAG(std::vector<std::string>, stop, {}, "Stop string (repeatable; a comma separates several)");
ABSL_FLAG(std::vector<std::string>, stop_token_ids, {}, "Token ids that stop generation, besides EOS (comma list or repeated)");
ABSL_FLAG(bool, ignore_eos, false, "Keep generating past EOS");
ABSL_FLAG(bool, include_stop_str_in_output, false, "Keep the matched stop string in the text");
ABSL_FLAG(int64_t, logprobs, 0, "Top-n log-probabilities per generated token, 0..20 (shown with --json)");
// Other verbs.
ABSL_FLAG(bool, add_bos, false, "tokenize: put a BOS token first (as Generate does for text prompts)");
ABSL_FLAG(std::string, service, "", "health: the service to check (\"\" = the whole server)");

namespace {

using mcserve::client::ClientOptions;
using mcserve::client::GenerationClient;
namespace client = mcserve::client;
namespace v1 = mcserve::v1;

constexpr char kUsage[] =
    "mcserve-cli [flags] VERB [ARGS]: a client of mcserve's gRPC API.\n"
    "Verbs:\n"
    "  stream PROMPT    generate and print the text as it arrives (summary line on stderr)\n"
    "  generate PROMPT  generate and print the whole text, then a summary line on stderr\n"
    "  abort ID         abort the request with this id (--request-id of a running stream)\n"
    "  tokenize TEXT    print the served model's token ids for TEXT\n"
    "  info             the served model (GetModelInfo)\n"
    "  server-info      version, uptime and counters (GetServerInfo)\n"
    "  health           grpc.health.v1 check: prints SERVING (exit 0) or another status (exit 1)\n"
    "Several words after the verb are joined with spaces. Flags may be written with dashes or underscores\n"
    "(--max-tokens = --max_tokens); list flags take a comma list or repeat. Errors: `mcserve-cli: CODE: message`\n"
    "on stderr, exit 1 (2 for a bad command line). Example:\n"
    "  mcserve-cli --address localhost:8001 --max-tokens 32 --temperature 0 stream \"Once upon a time\"";

int Fail(const absl::Status& status, int exit_code = 1) {
  std::fprintf(stderr, "mcserve-cli: %s: %s\n", absl::StatusCodeToString(status.code()).c_str(),
               std::string(status.message()).c_str());
  return exit_code;
}

ClientOptions OptionsFromFlags() {
  ClientOptions options;
  options.address = absl::GetFlag(FLAGS_address);
  options.api_key = absl::GetFlag(FLAGS_api_key);
  options.tls = absl::GetFlag(FLAGS_tls);
  options.tls_ca_path = absl::GetFlag(FLAGS_tls_ca);
  options.tls_cert_path = absl::GetFlag(FLAGS_tls_cert);
  options.tls_key_path = absl::GetFlag(FLAGS_tls_key);
  options.tls_server_name = absl::GetFlag(FLAGS_tls_server_name);
  options.timeout = absl::GetFlag(FLAGS_timeout);
  return options;
}

client::GenerateFlags GenerateFlagsFromFlags() {
  client::GenerateFlags f;
  f.request_id = absl::GetFlag(FLAGS_request_id);
  f.token_ids = absl::GetFlag(FLAGS_token_ids);
  f.temperature = absl::GetFlag(FLAGS_temperature);
  f.top_p = absl::GetFlag(FLAGS_top_p);
  f.top_k = absl::GetFlag(FLAGS_top_k);
  f.min_p = absl::GetFlag(FLAGS_min_p);
  f.repetition_penalty = absl::GetFlag(FLAGS_repetition_penalty);
  f.presence_penalty = absl::GetFlag(FLAGS_presence_penalty);
  f.frequency_penalty = absl::GetFlag(FLAGS_frequency_penalty);
  f.logit_bias = absl::GetFlag(FLAGS_logit_bias);
  f.seed = absl::GetFlag(FLAGS_seed);
  f.max_tokens = absl::GetFlag(FLAGS_max_tokens);
  f.min_tokens = absl::GetFlag(FLAGS_min_tokens);
  f.stop = absl::GetFlag(FLAGS_stop);
  f.stop_token_ids = absl::GetFlag(FLAGS_stop_token_ids);
  f.ignore_eos = absl::GetFlag(FLAGS_ignore_eos);
  f.include_stop_str_in_output = absl::GetFlag(FLAGS_include_stop_str_in_output);
  f.logprobs = absl::GetFlag(FLAGS_logprobs);
  return f;
}

// Blocks SIGINT and SIGTERM in this thread and every thread started after it; a watcher thread takes
// them and cancels the call (so Ctrl-C aborts the request on the server). Call before any thread starts.
void CancelOnSignal(client::CallCanceller* canceller) {
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  std::thread([canceller, signals] {
    int sig = 0;
    if (sigwait(&signals, &sig) == 0) canceller->Cancel();
  }).detach();
}

// stream / generate.
int RunGenerate(GenerationClient& client, const std::string& prompt, bool stream,
                client::CallCanceller* canceller) {
  absl::StatusOr<v1::GenerateRequest> request = client::BuildGenerateRequest(GenerateFlagsFromFlags(), prompt);
  if (!request.ok()) return Fail(request.status());
  const bool json = absl::GetFlag(FLAGS_json);
  v1::GenerateResponse total;
  auto on_chunk = [&](const v1::GenerateResponse& response) {
    client::AppendResponse(response, &total);
    if (!stream) return;
    const std::string out = json ? client::ToJson(response) + "\n" : response.text();
    std::fwrite(out.data(), 1, out.size(), stdout);
    std::fflush(stdout);
  };
  absl::StatusOr<v1::Completion> completion = client.Generate(*request, on_chunk, canceller);
  if (!completion.ok()) {
    if (stream && !json && !total.text().empty()) std::fputc('\n', stdout);
    return Fail(completion.status());
  }
  if (!stream) {
    const std::string out = json ? client::ToJson(total) : total.text();
    std::fwrite(out.data(), 1, out.size(), stdout);
  }
  if (!(stream && json)) std::fputc('\n', stdout);
  std::fflush(stdout);
  std::fprintf(stderr, "%s\n", client::SummaryLine(total.request_id(), *completion).c_str());
  return 0;
}

int RunAbort(GenerationClient& client, const std::string& id) {
  if (id.empty()) return Fail(absl::InvalidArgumentError("abort: give the request id (abort ID)"), 2);
  if (absl::Status s = client.Abort(id); !s.ok()) return Fail(s);
  if (absl::GetFlag(FLAGS_json)) std::printf("{}\n");
  return 0;
}

int RunTokenize(GenerationClient& client, const std::string& text) {
  absl::StatusOr<std::vector<int32_t>> ids = client.Tokenize(text, absl::GetFlag(FLAGS_add_bos));
  if (!ids.ok()) return Fail(ids.status());
  if (absl::GetFlag(FLAGS_json)) {
    v1::TokenizeResponse response;
    response.mutable_token_ids()->Assign(ids->begin(), ids->end());
    std::printf("%s\n", client::ToJson(response).c_str());
  } else {
    std::printf("%s\n", absl::StrJoin(*ids, " ").c_str());
  }
  return 0;
}

// info / server-info: the message as JSON or text format.
int PrintMessage(const google::protobuf::Message& message) {
  const std::string out = absl::GetFlag(FLAGS_json) ? client::ToJson(message) + "\n" : client::ToText(message);
  std::fwrite(out.data(), 1, out.size(), stdout);
  return 0;
}

int RunHealth(GenerationClient& client) {
  absl::StatusOr<client::ServingStatus> status = client.Health(absl::GetFlag(FLAGS_service));
  if (!status.ok()) return Fail(status.status());
  const char* name = client::ServingStatusName(*status);
  if (absl::GetFlag(FLAGS_json)) {
    std::printf("{\"status\":\"%s\"}\n", name);
  } else {
    std::printf("%s\n", name);
  }
  return *status == client::ServingStatus::kServing ? 0 : 1;
}

// Runs `verb` with the words after it joined as its argument.
int Run(const std::string& verb, const std::string& argument) {
  static const std::map<std::string, bool> kTakesArgument = {
      {"stream", true}, {"generate", true}, {"abort", true}, {"tokenize", true},
      {"info", false},  {"server-info", false}, {"health", false}};
  const auto it = kTakesArgument.find(verb);
  if (it == kTakesArgument.end()) {
    return Fail(absl::InvalidArgumentError(absl::StrCat("unknown verb \"", verb, "\" (see --help)")), 2);
  }
  if (!it->second && !argument.empty()) {
    return Fail(absl::InvalidArgumentError(absl::StrCat(verb, " takes no argument, got \"", argument, "\"")), 2);
  }
  client::CallCanceller canceller;
  const bool generates = verb == "stream" || verb == "generate";
  if (generates) CancelOnSignal(&canceller);
  absl::StatusOr<std::unique_ptr<GenerationClient>> client = GenerationClient::Create(OptionsFromFlags());
  if (!client.ok()) return Fail(client.status(), 2);
  GenerationClient& c = **client;
  if (generates) return RunGenerate(c, argument, verb == "stream", &canceller);
  if (verb == "abort") return RunAbort(c, argument);
  if (verb == "tokenize") return RunTokenize(c, argument);
  if (verb == "health") return RunHealth(c);
  if (verb == "info") {
    absl::StatusOr<v1::ModelInfo> info = c.GetModelInfo();
    if (!info.ok()) return Fail(info.status());
    return PrintMessage(*info);
  }
  absl::StatusOr<v1::ServerInfo> info = c.GetServerInfo();
  if (!info.ok()) return Fail(info.status());
  return PrintMessage(*info);
}

}  // namespace

int main(int argc, char** argv) {
  // gRPC's own log lines (a failed TLS handshake, ...) repeat the error printed below: dropped unless
  // GRPC_VERBOSITY asks for them.
  const char* grpc_verbosity = std::getenv("GRPC_VERBOSITY");
  if (grpc_verbosity == nullptr || *grpc_verbosity == '\0') gpr_set_log_function([](gpr_log_func_args*) {});
  std::vector<std::string> storage = client::NormalizeArgs(
      argc, argv, {{"MCSERVE_ADDRESS", "address"}, {"MCSERVE_API_KEY", "api_key"}},
      {"stop", "stop_token_ids", "token_ids", "logit_bias"});
  std::vector<char*> args;
  for (std::string& arg : storage) args.push_back(arg.data());
  absl::FlagsUsageConfig usage;
  usage.contains_help_flags = [](absl::string_view file) { return absl::EndsWith(file, "clients/cpp/mcserve_cli.cc"); };
  absl::SetFlagsUsageConfig(usage);
  absl::SetProgramUsageMessage(kUsage);
  std::vector<char*> positional = absl::ParseCommandLine(static_cast<int>(args.size()), args.data());
  if (positional.size() < 2) {
    return Fail(absl::InvalidArgumentError(
                    "missing verb: stream, generate, abort, tokenize, info, server-info or health (see --help)"),
                2);
  }
  const std::vector<std::string> words(positional.begin() + 2, positional.end());
  return Run(positional[1], absl::StrJoin(words, " "));
}
