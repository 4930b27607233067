// mcserve: the inference server. Loads a model, starts the engine and serves mcserve.v1.Generation
// (plus grpc.health.v1.Health and reflection) over gRPC. Prints
// `mcserve listening grpc=HOST:PORT http=HOST:PORT` as its first line of stdout, then serves until
// SIGTERM / SIGINT: health goes NOT_SERVING, new requests are refused, running ones get
// --shutdown-grace-seconds to finish, the rest are cancelled, and the process exits 0.
//
// Every flag can also be set with an environment variable MCSERVE_<FLAG NAME IN CAPITALS>
// (MCSERVE_GRPC_PORT=8001); a flag on the command line wins.
#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/flags/usage_config.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "base/status_macros.h"
#include "cli/flag_values.h"
#include "cli/mc_flags.h"
#include "engine/runner/cpu_libraries.h"
#include "engine/runner/model.h"
#include "engine/serving/engine.h"
#include "engine/serving/recurrent_runner.h"
#include "server/grpc/grpc_server.h"
#include "server/http/chat_template_config.h"
#include "server/http/http_server.h"
#include "server/metrics/caller_metrics.h"
#include "server/metrics/mcserve_metrics.h"
#include "server/metrics/metrics.h"

ABSL_FLAG(std::string, model, "", "Model directory (config.json, model.safetensors, tokenizer.model); "
                                  "default: the bundled model");
ABSL_FLAG(std::string, host, "0.0.0.0",
          "Address to listen on (both ports). Default 0.0.0.0 (all interfaces, like vLLM); use 127.0.0.1 "
          "to stay local");
ABSL_FLAG(int, grpc_port, 8001, "gRPC port; 0 picks a free port (printed on the first line)");
ABSL_FLAG(int, http_port, 8000, "HTTP port (metrics, health, OpenAI-compatible API); 0 picks a free port");
ABSL_FLAG(std::string, device, "",
          "cpu, cuda, or cuda-emu (CUDA kernels run by the CPU emulator, for tests); default: cuda when a GPU "
          "is present, else cpu");
ABSL_FLAG(int, threads, 0, "CPU threads for the model; 0 = all cores");
ABSL_FLAG(int, max_slots, 16, "State slots: the most requests that run at once");
ABSL_FLAG(int64_t, max_batch_tokens, 2048, "Tokens per engine step (decode + prefill), ≥ --max-slots");
ABSL_FLAG(int, max_waiting, 256, "Queued requests beyond the running ones; more → RESOURCE_EXHAUSTED");
ABSL_FLAG(int64_t, max_prompt_tokens, 1 << 20, "Longest prompt accepted, in tokens");
ABSL_FLAG(int, max_tokens_limit, 4096, "The largest max_tokens a request may ask for");
ABSL_FLAG(int64_t, max_request_bytes, 4 << 20,
          "Largest gRPC Generate request in bytes (larger → INVALID_ARGUMENT); gRPC drops messages over 4x this");
ABSL_FLAG(bool, prefix_caching, true, "Reuse the state of cached prompt prefixes (--no-prefix-caching: off)");
ABSL_FLAG(int64_t, prefix_block, 64, "Prefix-cache block in tokens (rounded up to whole MC segments)");
ABSL_FLAG(std::string, api_key, "",
          "If set, every RPC and HTTP route but health needs `authorization: Bearer <key>` (gRPC metadata or "
          "HTTP header; else UNAUTHENTICATED / 401). The key is named \"default\"");
ABSL_FLAG(std::string, api_key_file, "",
          "A file of named API keys, one `NAME KEY` per line (# comments): like --api-key with several keys; a "
          "request belongs to its key's name (only that name may abort it) and the per-key metrics carry it");
ABSL_FLAG(double, write_timeout_seconds, 60,
          "A running request whose client reads no output for this long is cancelled and its slot freed "
          "(mcserve:request_write_timeouts_total); 0 = never");
ABSL_FLAG(double, prefix_cache_mib, 1024,
          "Host memory for the prefix cache's state snapshots, in MiB (least recently used evicted beyond); "
          "-1 = unlimited");
ABSL_FLAG(std::string, tls_cert, "", "PEM certificate chain: serve gRPC and HTTP over TLS (with --tls-key)");
ABSL_FLAG(std::string, tls_key, "", "PEM private key for --tls-cert");
ABSL_FLAG(std::string, tls_client_ca, "", "PEM CA bundle: require and verify client certificates (mutual TLS)");
ABSL_FLAG(double, shutdown_grace_seconds, 30,
          "On SIGTERM/SIGINT: seconds running requests get to finish before they are cancelled");

namespace {

namespace engine = mcserve::engine;

// Flags that may come from MCSERVE_<NAME> environment variables.
constexpr const char* kEnvFlags[] = {
    "model", "host", "grpc_port", "http_port", "device", "threads", "max_slots", "max_batch_tokens",
    "max_waiting", "max_prompt_tokens", "max_tokens_limit", "max_request_bytes", "checkpoint_device_mib",
    "checkpoint_host_mib", "ssc_hot_pages", "prefix_caching", "prefix_block", "prefix_cache_mib", "api_key", "api_key_file",
    "write_timeout_seconds", "tls_cert", "tls_key", "tls_client_ca", "shutdown_grace_seconds", "mc_aggregation", "mc_segmentation", "mc_segment_size", "mc_init_mode", "mc_gate",
    "mc_pool", "mc_top_k", "mc_mean_combine", "mc_layers"};

int g_signal_pipe[2] = {-1, -1};
volatile sig_atomic_t g_signals = 0;

// The first SIGTERM / SIGINT starts the graceful stop (a byte on the pipe); a second exits at once.
void OnShutdownSignal(int sig) {
  g_signals = g_signals + 1;
  if (g_signals > 1) {
    static constexpr char kMessage[] = "mcserve: second signal: exiting now\n";
    [[maybe_unused]] ssize_t n = write(STDERR_FILENO, kMessage, sizeof(kMessage) - 1);
    _exit(128 + sig);
  }
  const unsigned char byte = static_cast<unsigned char>(sig);
  [[maybe_unused]] ssize_t n = write(g_signal_pipe[1], &byte, 1);  // async-signal-safe
}

int Fail(const absl::Status& status) {
  std::fprintf(stderr, "mcserve: %s\n", std::string(status.message()).c_str());
  return 1;
}

absl::StatusOr<std::string> ReadFile(const std::string& flag, const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::InvalidArgumentError(absl::StrCat("--", flag, ": cannot read \"", path, "\""));
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// --device, resolved: the default is cuda when a GPU is usable, else cpu.
absl::StatusOr<mcserve::kernels::Device> ChosenDevice() {
  return mcserve::cli::DeviceFromFlagValue(absl::GetFlag(FLAGS_device));
}

// "host:port" with IPv6 hosts bracketed.
std::string HostPort(const std::string& host, int port) {
  return absl::StrContains(host, ':') ? absl::StrCat("[", host, "]:", port) : absl::StrCat(host, ":", port);
}

// The flags that Run checks before loading anything.
absl::Status CheckServingFlags() {
  const int grpc_port = absl::GetFlag(FLAGS_grpc_port), http_port = absl::GetFlag(FLAGS_http_port);
  if (grpc_port < 0 || grpc_port > 65535) return absl::InvalidArgumentError("--grpc-port: not in [0, 65535]");
  if (http_port < 0 || http_port > 65535) return absl::InvalidArgumentError("--http-port: not in [0, 65535]");
  if (absl::GetFlag(FLAGS_max_tokens_limit) < 1) return absl::InvalidArgumentError("--max-tokens-limit: must be ≥ 1");
  const int64_t max_request_bytes = absl::GetFlag(FLAGS_max_request_bytes);
  if (max_request_bytes < 1 || max_request_bytes > (int64_t{1} << 29)) {
    return absl::InvalidArgumentError("--max-request-bytes: must be in [1, 512 MiB]");
  }
  if (!(absl::GetFlag(FLAGS_shutdown_grace_seconds) >= 0)) {
    return absl::InvalidArgumentError("--shutdown-grace-seconds: must be ≥ 0");
  }
  if (!(absl::GetFlag(FLAGS_write_timeout_seconds) >= 0)) {
    return absl::InvalidArgumentError("--write-timeout-seconds: must be ≥ 0");
  }
  if (!absl::GetFlag(FLAGS_api_key).empty() && !absl::GetFlag(FLAGS_api_key_file).empty()) {
    return absl::InvalidArgumentError("--api-key and --api-key-file: give one of them");
  }
  return absl::OkStatus();
}

// State slots, checkpoint tiers and prefix caching from the flags.
absl::StatusOr<engine::RecurrentRunnerOptions> RunnerOptionsFromFlags() {
  engine::RecurrentRunnerOptions options;
  options.num_slots = absl::GetFlag(FLAGS_max_slots);
  MCSERVE_ASSIGN_OR_RETURN(options.checkpoints, mcserve::cli::CheckpointOptionsFromFlags());
  options.prefix_caching = absl::GetFlag(FLAGS_prefix_caching);
  options.prefix_block = absl::GetFlag(FLAGS_prefix_block);
  auto prefix_bytes = engine::BudgetBytesFromMib(absl::GetFlag(FLAGS_prefix_cache_mib));
  if (!prefix_bytes.ok()) return mcserve::cli::ForFlag("prefix-cache-mib", prefix_bytes.status());
  options.prefix_cache_bytes = *prefix_bytes;
  return options;
}

// The served model's name (/v1/models, the metrics' model_name): the model directory's name.
std::string ModelName(const std::string& dir) {
  std::string name = std::filesystem::path(dir).lexically_normal().filename().string();
  if (name.empty()) name = std::filesystem::path(dir).parent_path().filename();
  return name;
}

// The API keys both front ends accept: --api-key-file's named keys, else --api-key (named "default").
absl::StatusOr<mcserve::server::ApiKeys> ApiKeysFromFlags() {
  if (const std::string key_file = absl::GetFlag(FLAGS_api_key_file); !key_file.empty()) {
    auto keys = mcserve::server::ApiKeys::FromFile(key_file);
    if (!keys.ok()) return mcserve::cli::ForFlag("api-key-file", keys.status());
    return keys;
  }
  return mcserve::server::ApiKeys::Single(absl::GetFlag(FLAGS_api_key));
}

// The gRPC front end's options from the flags (TLS files read here; keys and accounting set by Run).
absl::StatusOr<mcserve::server::GrpcServerOptions> GrpcOptionsFromFlags(const std::string& dir) {
  mcserve::server::GrpcServerOptions options;
  options.host = absl::GetFlag(FLAGS_host);
  options.port = absl::GetFlag(FLAGS_grpc_port);
  for (auto [flag, path, pem] : {std::tuple{"tls-cert", absl::GetFlag(FLAGS_tls_cert), &options.tls_cert_pem},
                                 std::tuple{"tls-key", absl::GetFlag(FLAGS_tls_key), &options.tls_key_pem},
                                 std::tuple{"tls-client-ca", absl::GetFlag(FLAGS_tls_client_ca),
                                            &options.tls_client_ca_pem}}) {
    if (path.empty()) continue;
    MCSERVE_ASSIGN_OR_RETURN(*pem, ReadFile(flag, path));
  }
  options.model_path = dir;
  options.version = MCSERVE_VERSION;
  options.max_request_bytes = static_cast<size_t>(absl::GetFlag(FLAGS_max_request_bytes));
  options.write_timeout = absl::Seconds(absl::GetFlag(FLAGS_write_timeout_seconds));
  return options;
}

// The HTTP front end's options from the flags (keys and accounting set by Run); /metrics renders
// `registry`.
mcserve::server::HttpServerOptions HttpOptionsFromFlags(const std::string& model_name,
                                                        mcserve::server::Registry* registry) {
  mcserve::server::HttpServerOptions options;
  options.host = absl::GetFlag(FLAGS_host);
  options.port = absl::GetFlag(FLAGS_http_port);
  options.model_name = model_name;
  options.tls_cert = absl::GetFlag(FLAGS_tls_cert);
  options.tls_key = absl::GetFlag(FLAGS_tls_key);
  options.write_timeout = absl::Seconds(absl::GetFlag(FLAGS_write_timeout_seconds));
  options.max_body_bytes = absl::GetFlag(FLAGS_max_request_bytes);
  options.metrics = [registry] { return registry->Render(); };
  return options;
}

// Blocks until SIGTERM / SIGINT, then stops gracefully: both front ends stop admitting at once
// (gRPC health NOT_SERVING and UNAVAILABLE; HTTP /ready and new completions 503), requests in flight
// on either get --shutdown-grace-seconds, the rest are cancelled, and every connection is closed.
void ServeUntilSignal(mcserve::server::GrpcServer& grpc_server, mcserve::server::HttpServer& http_server,
                      engine::Engine& eng) {
  unsigned char sig = 0;
  while (read(g_signal_pipe[0], &sig, 1) != 1) {
  }
  std::fprintf(stderr, "mcserve: %s: shutting down\n", sig == SIGINT ? "SIGINT" : "SIGTERM");
  grpc_server.StopAdmitting();
  http_server.StopAdmitting();
  const absl::Time grace_end = absl::Now() + absl::Seconds(absl::GetFlag(FLAGS_shutdown_grace_seconds));
  while (grpc_server.active_streams() + http_server.active_requests() > 0 && absl::Now() < grace_end) {
    absl::SleepFor(absl::Milliseconds(20));
  }
  eng.Shutdown();  // cancels what is left: every stream gets its final (cancelled) response
  grpc_server.Shutdown(absl::Seconds(5));
  http_server.Stop();  // closes every connection, idle and slow ones too
}

absl::Status Run() {
  MCSERVE_RETURN_IF_ERROR(CheckServingFlags());
  std::string dir = absl::GetFlag(FLAGS_model);
  if (dir.empty()) dir = MCSERVE_DEFAULT_MODEL;
  MCSERVE_ASSIGN_OR_RETURN(mcserve::kernels::Device device, ChosenDevice());
  // --mc-* flags override the model's memory_caching (post-training Memory Caching).
  MCSERVE_ASSIGN_OR_RETURN(auto model, engine::Model::Load(dir, {.device = device,
                                                                 .num_threads = absl::GetFlag(FLAGS_threads),
                                                                 .mc_overrides = mcserve::cli::McOverridesFromFlags()}));
  MCSERVE_ASSIGN_OR_RETURN(engine::RecurrentRunnerOptions runner_options, RunnerOptionsFromFlags());
  MCSERVE_ASSIGN_OR_RETURN(auto runner, engine::RecurrentRunner::Create(model.get(), runner_options));

  // Prometheus metrics: latencies observed by the engine, its stats read on every scrape.
  const std::string model_name = ModelName(dir);
  mcserve::server::Registry registry;
  MCSERVE_ASSIGN_OR_RETURN(auto metrics, mcserve::server::McserveMetrics::Create(registry, model_name));
  mcserve::server::MetricsLatencyObserver latency_observer(*metrics);

  engine::EngineOptions engine_options;
  engine_options.max_waiting = absl::GetFlag(FLAGS_max_waiting);
  engine_options.max_batch_tokens = absl::GetFlag(FLAGS_max_batch_tokens);
  engine_options.max_prompt_tokens = absl::GetFlag(FLAGS_max_prompt_tokens);
  engine_options.max_tokens_limit = absl::GetFlag(FLAGS_max_tokens_limit);
  engine_options.latency_observer = &latency_observer;
  engine_options.write_timeout = absl::Seconds(absl::GetFlag(FLAGS_write_timeout_seconds));
  MCSERVE_ASSIGN_OR_RETURN(auto eng, engine::Engine::Create(std::move(runner), &model->tokenizer(), engine_options));
  registry.AddRenderHook([e = eng.get(), m = metrics.get()] { m->UpdateFromEngineStats(e->Stats()); });

  MCSERVE_ASSIGN_OR_RETURN(mcserve::server::ApiKeys api_keys, ApiKeysFromFlags());
  MCSERVE_ASSIGN_OR_RETURN(auto caller_metrics,
                           mcserve::server::CallerMetrics::Create(registry, model_name, api_keys.names()));
  MCSERVE_ASSIGN_OR_RETURN(mcserve::server::GrpcServerOptions grpc_options, GrpcOptionsFromFlags(dir));
  grpc_options.api_keys = api_keys;
  grpc_options.accounting = caller_metrics.get();
  MCSERVE_ASSIGN_OR_RETURN(auto grpc_server, mcserve::server::StartGrpcServer(eng.get(), model.get(), grpc_options));
  mcserve::server::HttpServerOptions http_options = HttpOptionsFromFlags(model_name, &registry);
  http_options.api_keys = std::move(api_keys);
  http_options.version = MCSERVE_VERSION;
  http_options.chat = mcserve::server::LoadChatTemplateConfig(dir);
  if (!http_options.chat.error.empty()) {
    std::fprintf(stderr, "mcserve: warning: chat completions unavailable: %s\n", http_options.chat.error.c_str());
  }
  http_options.accounting = caller_metrics.get();
  MCSERVE_ASSIGN_OR_RETURN(auto http_server,
                           mcserve::server::HttpServer::Start(eng.get(), &model->tokenizer(), std::move(http_options)));
  std::printf("mcserve listening grpc=%s http=%s\n", HostPort(grpc_options.host, grpc_server->port()).c_str(),
              HostPort(grpc_options.host, http_server->port()).c_str());
  std::fflush(stdout);
  std::fprintf(stderr, "mcserve: serving %s on %d state slots\n", dir.c_str(), eng->EffectiveConcurrency());

  ServeUntilSignal(*grpc_server, *http_server, *eng);
  grpc_server.reset();
  std::fprintf(stderr, "mcserve: stopped\n");
  return absl::OkStatus();
}

// Raises the soft limit on open files to the hard limit, so that thousands of client connections
// fit (the soft limit is often 1024). Best effort: a failure leaves the limit as it was.
void RaiseOpenFileLimit() {
  struct rlimit limit = {};
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0 || limit.rlim_cur >= limit.rlim_max) return;
  limit.rlim_cur = limit.rlim_max;
  setrlimit(RLIMIT_NOFILE, &limit);
}

}  // namespace

int main(int argc, char** argv) {
  mcserve::engine::PrepareCpuLibraries(argv);  // may re-execute: before anything else
  RaiseOpenFileLimit();
  // SIGTERM / SIGINT → a byte on a pipe that Run reads once serving. (A handler rather than a
  // blocked mask: libraries such as OpenBLAS start threads before main, which would take the signal.)
  if (pipe(g_signal_pipe) != 0) return Fail(absl::InternalError("pipe() failed"));
  struct sigaction action = {};
  action.sa_handler = OnShutdownSignal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;
  sigaction(SIGTERM, &action, nullptr);
  sigaction(SIGINT, &action, nullptr);

  // MCSERVE_* variables go first, so the command line (parsed after them) wins.
  std::vector<std::string> storage = mcserve::cli::NormalizedFlagNames(argc, argv);
  std::vector<std::string> with_env = {storage[0]};
  for (const char* name : kEnvFlags) {
    const std::string var = "MCSERVE_" + absl::AsciiStrToUpper(name);
    const char* value = std::getenv(var.c_str());
    if (value != nullptr && *value != '\0') with_env.push_back(absl::StrCat("--", name, "=", value));
  }
  with_env.insert(with_env.end(), storage.begin() + 1, storage.end());
  std::vector<char*> args;
  for (auto& arg : with_env) args.push_back(arg.data());

  absl::FlagsUsageConfig usage;
  usage.contains_help_flags = [](absl::string_view file) {
    return absl::EndsWith(file, "server/main.cc") || absl::EndsWith(file, "cli/mc_flags.cc");
  };
  absl::SetFlagsUsageConfig(usage);
  absl::SetProgramUsageMessage(
      "mcserve [--model DIR] [--host H] [--grpc-port N] [--http-port N] [...]: serve a recurrent LM over gRPC "
      "(mcserve.v1.Generation, grpc.health.v1.Health, reflection).\n"
      "Flags may be written with dashes or underscores (--grpc-port = --grpc_port); every flag can also be "
      "set with MCSERVE_<NAME> (MCSERVE_GRPC_PORT=8001, MCSERVE_PREFIX_CACHING=false); the command line "
      "wins. Port 0 picks a free port; the first line of stdout is "
      "`mcserve listening grpc=HOST:PORT http=HOST:PORT`.");
  absl::ParseCommandLine(static_cast<int>(args.size()), args.data());
  const absl::Status status = Run();
  return status.ok() ? 0 : Fail(status);
}
