// serve_load: a load generator for a running mcserve, like `vllm bench serve` with its random
// dataset. Sends --num-prompts requests of exactly --input-len random prompt token ids (TokenIds
// prompts) and --output-len generated tokens (ignore_eos, greedy by default) over gRPC, with
// --max-concurrency in flight and/or Poisson arrivals at --request-rate, and prints vLLM's result
// block (throughputs; mean/median/P99 TTFT, TPOT, ITL, E2EL, measured here with steady_clock).
// Links the client only (clients/cpp), never the engine. Driven by bench/serve_load.py.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/flags/usage_config.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "bench/serve_load_metrics.h"
#include "bench/serve_load_runner.h"
#include "clients/cpp/cli_args.h"
#include "clients/cpp/generation_client.h"

ABSL_FLAG(std::string, address, "localhost:8001", "Server's gRPC address HOST:PORT (env MCSERVE_ADDRESS)");
ABSL_FLAG(std::string, api_key, "", "API key (env MCSERVE_API_KEY)");
ABSL_FLAG(bool, tls, false, "Use TLS (implied by --tls-ca/--tls-cert/--tls-key)");
ABSL_FLAG(std::string, tls_ca, "", "PEM CA bundle that signs the server's certificate");
ABSL_FLAG(std::string, tls_cert, "", "PEM client certificate chain, for mutual TLS (with --tls-key)");
ABSL_FLAG(std::string, tls_key, "", "PEM private key of --tls-cert");
ABSL_FLAG(std::string, tls_server_name, "", "Name to verify the server's certificate against");
ABSL_FLAG(int64_t, num_prompts, 100, "Requests to send");
ABSL_FLAG(int, max_concurrency, 0, "Most requests in flight; 0 = unlimited");
ABSL_FLAG(double, request_rate, std::numeric_limits<double>::infinity(),
          "Mean requests/s (Poisson arrivals); inf = all at once");
ABSL_FLAG(int64_t, input_len, 64, "Prompt tokens per request (random ids)");
ABSL_FLAG(int64_t, output_len, 64, "Generated tokens per request (EOS ignored)");
ABSL_FLAG(double, temperature, 0, "Sampling temperature; 0 = greedy");
ABSL_FLAG(uint64_t, seed, 0, "Seed of the prompts and the arrival intervals");
ABSL_FLAG(int64_t, vocab_size, 0,
          "Prompt ids are drawn from [3, N); 0 = the model's vocab_size (GetModelInfo). Give the tokenizer's "
          "size when the model pads its vocabulary beyond it (the server accepts ids below both)");
ABSL_FLAG(std::string, json, "", "Also write the results as JSON (vLLM's --save-result keys) to this file");

namespace {

namespace client = mcserve::client;
namespace bench = mcserve::bench;
namespace v1 = mcserve::v1;

int Fail(const std::string& message) {
  std::fprintf(stderr, "serve_load: %s\n", message.c_str());
  return 1;
}

// The flags' settings, checked; "" when valid, else the message naming the flag.
std::string CheckFlags() {
  if (absl::GetFlag(FLAGS_num_prompts) < 1) return "--num_prompts: must be ≥ 1";
  if (absl::GetFlag(FLAGS_max_concurrency) < 0) return "--max_concurrency: must be ≥ 0";
  if (!(absl::GetFlag(FLAGS_request_rate) > 0)) return "--request_rate: must be > 0 (inf = all at once)";
  if (absl::GetFlag(FLAGS_input_len) < 1) return "--input_len: must be ≥ 1";
  if (absl::GetFlag(FLAGS_output_len) < 1 || absl::GetFlag(FLAGS_output_len) > std::numeric_limits<uint32_t>::max()) {
    return "--output_len: must be in [1, 2^32)";
  }
  if (absl::GetFlag(FLAGS_vocab_size) < 0) return "--vocab_size: must be ≥ 0";
  return "";
}

client::ClientOptions OptionsFromFlags() {
  client::ClientOptions options;
  options.address = absl::GetFlag(FLAGS_address);
  options.api_key = absl::GetFlag(FLAGS_api_key);
  options.tls = absl::GetFlag(FLAGS_tls);
  options.tls_ca_path = absl::GetFlag(FLAGS_tls_ca);
  options.tls_cert_path = absl::GetFlag(FLAGS_tls_cert);
  options.tls_key_path = absl::GetFlag(FLAGS_tls_key);
  options.tls_server_name = absl::GetFlag(FLAGS_tls_server_name);
  return options;
}

// --num_prompts requests of --input_len ids uniform in [3, vocab) (above pad/bos/eos), each generating
// exactly --output_len tokens.
std::vector<v1::GenerateRequest> MakeRequests(int64_t vocab) {
  std::mt19937_64 rng(absl::GetFlag(FLAGS_seed));
  std::uniform_int_distribution<int32_t> id(3, static_cast<int32_t>(vocab - 1));
  std::vector<v1::GenerateRequest> requests(static_cast<size_t>(absl::GetFlag(FLAGS_num_prompts)));
  for (v1::GenerateRequest& request : requests) {
    for (int64_t t = 0; t < absl::GetFlag(FLAGS_input_len); ++t) request.mutable_token_ids()->add_ids(id(rng));
    request.mutable_sampling()->set_temperature(static_cast<float>(absl::GetFlag(FLAGS_temperature)));
    request.mutable_sampling()->set_seed(rng());
    request.mutable_stop()->set_max_tokens(static_cast<uint32_t>(absl::GetFlag(FLAGS_output_len)));
    request.mutable_stop()->set_ignore_eos(true);
  }
  return requests;
}

int Run() {
  if (std::string bad = CheckFlags(); !bad.empty()) return Fail(bad);
  auto generation_client = client::GenerationClient::Create(OptionsFromFlags());
  if (!generation_client.ok()) return Fail(generation_client.status().ToString());
  client::GenerationClient& c = **generation_client;
  absl::StatusOr<v1::ModelInfo> info = c.GetModelInfo();
  if (!info.ok()) return Fail(absl::StrCat("GetModelInfo: ", info.status().ToString()));
  int64_t vocab = info->vocab_size();
  if (absl::GetFlag(FLAGS_vocab_size) > 0) vocab = std::min<int64_t>(vocab, absl::GetFlag(FLAGS_vocab_size));
  if (vocab <= 3) return Fail(absl::StrCat("the vocabulary (", vocab, " ids) has no room for random prompt ids"));

  const bench::RunSettings settings{.address = c.options().address, .model = info->model_path(),
                                    .num_prompts = absl::GetFlag(FLAGS_num_prompts),
                                    .input_len = absl::GetFlag(FLAGS_input_len),
                                    .output_len = absl::GetFlag(FLAGS_output_len),
                                    .max_concurrency = absl::GetFlag(FLAGS_max_concurrency),
                                    .request_rate = absl::GetFlag(FLAGS_request_rate),
                                    .seed = absl::GetFlag(FLAGS_seed)};
  const std::vector<v1::GenerateRequest> requests = MakeRequests(vocab);
  const bench::LoadResult load = bench::RunLoad(
      c, requests, {.max_concurrency = settings.max_concurrency, .request_rate = settings.request_rate,
                    .seed = settings.seed});
  const bench::Summary summary = bench::Summarize(load.records, load.duration);
  std::fputs(bench::FormatSummary(settings, summary).c_str(), stdout);
  for (const std::string& error : summary.errors) std::fprintf(stderr, "serve_load: a request failed: %s\n", error.c_str());
  if (const std::string path = absl::GetFlag(FLAGS_json); !path.empty()) {
    std::ofstream out(path);
    out << bench::SummaryJson(settings, summary).dump(2) << "\n";
    if (!out) return Fail(absl::StrCat("--json: cannot write \"", path, "\""));
  }
  return summary.completed > 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> storage =
      client::NormalizeArgs(argc, argv, {{"MCSERVE_ADDRESS", "address"}, {"MCSERVE_API_KEY", "api_key"}}, {});
  std::vector<char*> args;
  for (std::string& arg : storage) args.push_back(arg.data());
  absl::FlagsUsageConfig usage;
  usage.contains_help_flags = [](absl::string_view file) { return absl::EndsWith(file, "bench/serve_load.cc"); };
  absl::SetFlagsUsageConfig(usage);
  absl::SetProgramUsageMessage(
      "serve_load --address HOST:PORT [--num-prompts N] [--max-concurrency C | --request-rate R] [--input-len I] "
      "[--output-len O] [--seed S] [--json OUT]: load a running mcserve like `vllm bench serve` (random dataset).\n"
      "Flags may be written with dashes or underscores.");
  std::vector<char*> positional = absl::ParseCommandLine(static_cast<int>(args.size()), args.data());
  if (positional.size() > 1) return Fail(absl::StrCat("unexpected argument \"", positional[1], "\" (see --help)"));
  return Run();
}
