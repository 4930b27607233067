// mcserve-eval: quality measurements through the engine (see README.md here).
//   mcserve-eval perplexity --text FILE --context N [--chunk C] [--max-windows W] [--bucket B]
//   mcserve-eval passkey --haystack FILE --length N --depth D [--trials K] [--seed S]
// Both take mcserve-run's --model, --device, --threads and Memory Caching flags (tools/common),
// print a table and, with --json FILE (or -, for stdout instead of the table), every number as JSON.
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/status_macros.h"
#include "nlohmann/json.hpp"
#include "cli/command_line.h"
#include "cli/mc_flags.h"
#include "cli/model_flags.h"
#include "cli/tool_engine.h"
#include "tools/eval/passkey.h"
#include "tools/eval/passkey_prompt.h"
#include "tools/eval/passkey_report.h"
#include "tools/eval/perplexity.h"
#include "tools/eval/perplexity_report.h"
#include "tools/eval/text_tokens.h"
#include "engine/runner/cpu_libraries.h"

ABSL_FLAG(std::string, text, "", "perplexity: UTF-8 text file to score");
ABSL_FLAG(int64_t, context, 256, "perplexity: tokens per window (each window from a fresh state), >= 2");
ABSL_FLAG(int64_t, max_windows, 0, "perplexity: evaluate at most this many windows (the first ones); 0 = all");
ABSL_FLAG(int64_t, bucket, 256, "perplexity: width in tokens of the per-position NLL buckets");
ABSL_FLAG(std::string, haystack, "", "passkey: UTF-8 text file the filler is taken from");
ABSL_FLAG(int64_t, length, 1024, "passkey: prompt length in tokens, BOS included");
ABSL_FLAG(double, depth, 0.5, "passkey: where the key goes in the filler, 0 (start) to 1 (end)");
ABSL_FLAG(int, trials, 10, "passkey: prompts (each with its own key and filler offset)");
ABSL_FLAG(uint64_t, seed, 1, "passkey: seed of the keys and filler offsets");
ABSL_FLAG(std::string, template, "standard",
          "passkey: prompt wording, standard (\"There is a pass key hidden in this text. ... The pass key is K. "
          "Remember it. K is the pass key. ...\") or trained (tools/train's passkey examples: \"... The pass key is "
          "K. Remember it. ...\"); both end \"What is the pass key? The pass key is\"");
ABSL_FLAG(int, answer_tokens, 8, "passkey: tokens greedily generated per prompt");
ABSL_FLAG(int64_t, chunk, 256, "Tokens per forward step (bounds memory: one chunk's logits)");
ABSL_FLAG(std::string, json, "", "Also write every number and the settings as JSON to this file; - = stdout "
                                 "(instead of the table)");

namespace {

namespace tools = mcserve::tools;
namespace cli = mcserve::cli;
using mcserve::engine::Model;
using nlohmann::json;

constexpr char kDefaultModel[] = MCSERVE_DEFAULT_MODEL;

int Fail(const absl::Status& status) {
  std::fprintf(stderr, "mcserve-eval: %s\n", std::string(status.message()).c_str());
  return 1;
}

// The model, device and Memory Caching settings of the run.
json ModelSettings(const Model& model, const mcserve::engine::CheckpointStoreOptions& store) {
  const auto& mc = model.config().memory_caching;
  return {{"model", cli::ModelDirFromFlags(kDefaultModel)},
          {"device", mcserve::kernels::DeviceName(model.context().device)},
          {"threads", cli::ThreadsFromFlags()},
          {"memory_caching", mc ? json(mcserve::engine::DescribeMcConfig(*mc)) : json(nullptr)},
          {"mc_overrides", cli::McOverridesFromFlags()},
          {"checkpoint_device_bytes", store.device_bytes},
          {"checkpoint_host_bytes", store.host_bytes},
          {"ssc_hot_pages", store.hot_pages}};
}

// Prints `table` unless --json is "-"; writes {"settings", "results"} to --json when given.
absl::Status Emit(const std::string& table, const json& settings, const json& results) {
  const std::string path = absl::GetFlag(FLAGS_json);
  if (path != "-") std::fputs(table.c_str(), stdout);
  if (path.empty()) return absl::OkStatus();
  const std::string text =
      json{{"settings", settings}, {"results", results}}.dump(2, ' ', false, json::error_handler_t::replace) + "\n";
  if (path == "-") {
    std::fputs(text.c_str(), stdout);
    return absl::OkStatus();
  }
  std::ofstream out(path);
  out << text;
  out.close();
  if (!out) return absl::InvalidArgumentError(absl::StrCat("--json: cannot write ", path));
  return absl::OkStatus();
}

// A loaded model and the one-slot engine (the server's Engine) the evaluation drives.
struct Evaluator {
  std::unique_ptr<Model> model;
  mcserve::engine::CheckpointStoreOptions store;
  std::unique_ptr<mcserve::engine::Engine> engine;  // after `model`: destroyed first
};

absl::StatusOr<Evaluator> LoadEvaluator() {
  Evaluator e;
  MCSERVE_ASSIGN_OR_RETURN(e.model, cli::LoadModelFromFlags(kDefaultModel));
  if (const auto& mc = e.model->config().memory_caching) {
    std::fprintf(stderr, "mcserve-eval: memory caching: %s\n", mcserve::engine::DescribeMcConfig(*mc).c_str());
  }
  MCSERVE_ASSIGN_OR_RETURN(e.store, cli::CheckpointOptionsFromFlags());
  MCSERVE_ASSIGN_OR_RETURN(e.engine, cli::OneSlotEngine(*e.model, e.store, absl::GetFlag(FLAGS_chunk)));
  return e;
}

// The tokens of the file named by --<flag>.
absl::StatusOr<std::vector<int32_t>> FlagFileTokens(const Model& model, const char* flag, const std::string& path) {
  if (path.empty()) return absl::InvalidArgumentError(absl::StrCat("--", flag, " is required"));
  auto ids = tools::TokenizeTextFile(model.tokenizer(), path);
  if (!ids.ok()) return cli::ForFlag(flag, ids.status());
  return ids;
}

absl::Status RunPerplexity() {
  tools::PerplexityOptions options{.context = absl::GetFlag(FLAGS_context), .chunk = absl::GetFlag(FLAGS_chunk),
                                   .max_windows = absl::GetFlag(FLAGS_max_windows), .bucket = absl::GetFlag(FLAGS_bucket)};
  if (options.context < 2) {
    return absl::InvalidArgumentError(absl::StrCat("--context: must be at least 2 tokens, got ", options.context));
  }
  MCSERVE_ASSIGN_OR_RETURN(Evaluator e, LoadEvaluator());
  MCSERVE_ASSIGN_OR_RETURN(std::vector<int32_t> stream, FlagFileTokens(*e.model, "text", absl::GetFlag(FLAGS_text)));
  if (static_cast<int64_t>(stream.size()) < options.context) {
    return absl::InvalidArgumentError(absl::StrCat("--text: ", absl::GetFlag(FLAGS_text), " has ", stream.size(),
                                                   " tokens, fewer than one window of --context ", options.context));
  }
  options.on_window = [](int64_t w, double nll) {
    std::fprintf(stderr, "mcserve-eval: window %lld: mean NLL %.5f\n", static_cast<long long>(w), nll);
  };
  MCSERVE_ASSIGN_OR_RETURN(tools::PerplexityResult result,
                           tools::EvaluatePerplexity(*e.engine, static_cast<int32_t>(e.model->config().bos_token_id),
                                                      stream, options));
  json settings = ModelSettings(*e.model, e.store);
  settings.update({{"subcommand", "perplexity"}, {"text", absl::GetFlag(FLAGS_text)}, {"context", options.context},
                   {"chunk", options.chunk}, {"max_windows", options.max_windows}, {"bucket", options.bucket}});
  return Emit(tools::PerplexityTable(result), settings, tools::PerplexityJson(result));
}

absl::Status RunPasskey() {
  tools::PasskeyOptions options{.length = absl::GetFlag(FLAGS_length), .depth = absl::GetFlag(FLAGS_depth),
                                      .trials = absl::GetFlag(FLAGS_trials), .seed = absl::GetFlag(FLAGS_seed),
                                      .answer_tokens = absl::GetFlag(FLAGS_answer_tokens),
                                      .chunk = static_cast<int>(absl::GetFlag(FLAGS_chunk))};
  if (!(options.depth >= 0 && options.depth <= 1)) {
    return absl::InvalidArgumentError(absl::StrCat("--depth: must be in [0, 1], got ", options.depth));
  }
  auto prompt_template = tools::PasskeyTemplateByName(absl::GetFlag(FLAGS_template));
  if (!prompt_template.ok()) return cli::ForFlag("template", prompt_template.status());
  options.prompt_template = *prompt_template;
  MCSERVE_ASSIGN_OR_RETURN(Evaluator e, LoadEvaluator());
  MCSERVE_ASSIGN_OR_RETURN(std::vector<int32_t> haystack,
                           FlagFileTokens(*e.model, "haystack", absl::GetFlag(FLAGS_haystack)));
  auto on_trial = [](const tools::PasskeyTrial& t) {
    std::fprintf(stderr, "mcserve-eval: key %s: %s\n", t.key.c_str(), t.correct ? "correct" : "wrong");
  };
  MCSERVE_ASSIGN_OR_RETURN(tools::PasskeyResult result,
                           tools::RunPasskey(*e.engine, e.model->tokenizer(), haystack, options, on_trial));
  json settings = ModelSettings(*e.model, e.store);
  settings.update({{"subcommand", "passkey"}, {"haystack", absl::GetFlag(FLAGS_haystack)}, {"length", options.length},
                   {"depth", options.depth}, {"trials", options.trials}, {"seed", options.seed},
                   {"answer_tokens", options.answer_tokens}, {"chunk", options.chunk},
                   {"template", {{"name", options.prompt_template.name}, {"intro", options.prompt_template.intro},
                                 {"needle", options.prompt_template.needle},
                                 {"question", options.prompt_template.question}}}});
  return Emit(tools::PasskeyTable(result), settings, tools::PasskeyJson(result));
}

absl::Status Run(const std::vector<char*>& positional) {
  if (positional.size() != 2) {
    return absl::InvalidArgumentError(absl::StrCat(
        "expected one subcommand, perplexity or passkey, got ", positional.size() - 1,
        positional.size() > 2 ? absl::StrCat(": ", absl::StrJoin(positional.begin() + 1, positional.end(), " ")) : ""));
  }
  const std::string command = positional[1];
  if (absl::GetFlag(FLAGS_chunk) < 1 || absl::GetFlag(FLAGS_chunk) > (1 << 30)) {
    return absl::InvalidArgumentError(absl::StrCat("--chunk: must be positive, got ", absl::GetFlag(FLAGS_chunk)));
  }
  if (command == "perplexity") return RunPerplexity();
  if (command == "passkey") return RunPasskey();
  return absl::InvalidArgumentError(absl::StrCat("unknown subcommand '", command, "' (expected perplexity or passkey)"));
}

}  // namespace

// argv with "--json -" joined into "--json=-" (absl would warn that "-" looks like a mistake).
std::vector<char*> JoinJsonDash(std::vector<char*> args) {
  static char joined[] = "--json=-";
  std::vector<char*> out;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string arg = args[i];
    if ((arg == "--json" || arg == "-json") && i + 1 < args.size() && std::string(args[i + 1]) == "-") {
      out.push_back(joined);
      ++i;
    } else {
      out.push_back(args[i]);
    }
  }
  return out;
}

int main(int argc, char** argv) {
  mcserve::engine::PrepareCpuLibraries(argv);  // may re-execute: before anything else
  std::vector<std::string> storage;
  std::vector<char*> args = JoinJsonDash(cli::NormalizeFlagNames(argc, argv, &storage));
  cli::SetToolUsage("tools/eval/",
                      "mcserve-eval perplexity --text FILE --context N [--chunk C] [--max-windows W] [--bucket B]\n"
                      "       mcserve-eval passkey --haystack FILE --length N --depth D [--trials K] [--seed S] [--template T]\n"
                      "Both take --model, --device, --threads, the --mc-* flags and --json FILE|-.\n"
                      "Flags may be written with dashes or underscores (--max-windows = --max_windows).");
  const std::vector<char*> positional = absl::ParseCommandLine(static_cast<int>(args.size()), args.data());
  const absl::Status status = Run(positional);
  return status.ok() ? 0 : Fail(status);
}
