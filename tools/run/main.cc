// mcserve-run: offline generation. Loads a model directory and runs the prompt as one request
// through the server's Engine (one slot), streaming the generated text to stdout as it is produced.
#include <cstdio>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_cat.h"
#include "engine/model/tokenizer.h"
#include "engine/runner/cpu_libraries.h"
#include "engine/runner/model.h"
#include "engine/serving/engine.h"
#include "base/status_macros.h"
#include "cli/command_line.h"
#include "cli/mc_flags.h"
#include "cli/model_flags.h"
#include "cli/tool_engine.h"

ABSL_FLAG(std::string, prompt, "", "Prompt text (UTF-8)");
ABSL_FLAG(int, max_tokens, 64, "Maximum number of tokens to generate");
ABSL_FLAG(double, temperature, 0.8, "Sampling temperature; 0 = greedy");
ABSL_FLAG(double, top_p, 1.0, "Nucleus sampling: keep the smallest set of tokens with this much mass");
ABSL_FLAG(int, top_k, 0, "Keep only the k most likely tokens; 0 = all");
ABSL_FLAG(int64_t, seed, -1, "Random seed for reproducible sampling; -1 = random");
ABSL_FLAG(int, prefill_chunk, 256, "Prompt tokens per prefill step");
// --model, --device, --threads and the Memory Caching flags are shared with mcserve-eval:
// cli/model_flags.cc and cli/mc_flags.cc.

namespace {

int Fail(const absl::Status& status) {
  std::fprintf(stderr, "mcserve-run: %s\n", std::string(status.message()).c_str());
  return 1;
}

int Run() {
  auto model = mcserve::cli::LoadModelFromFlags(MCSERVE_DEFAULT_MODEL);
  if (!model.ok()) return Fail(model.status());
  const auto& tokenizer = (*model)->tokenizer();
  auto prompt = tokenizer.Encode(absl::GetFlag(FLAGS_prompt), /*add_bos=*/true);
  if (!prompt.ok()) return Fail(absl::InvalidArgumentError(absl::StrCat("--prompt: ", prompt.status().message())));
  if (const auto& mc = (*model)->config().memory_caching) {
    std::fprintf(stderr, "mcserve-run: memory caching: %s\n", mcserve::engine::DescribeMcConfig(*mc).c_str());
  }
  auto store_options = mcserve::cli::CheckpointOptionsFromFlags();
  if (!store_options.ok()) return Fail(store_options.status());
  if (absl::GetFlag(FLAGS_prefill_chunk) < 1) {
    return Fail(absl::InvalidArgumentError(
        absl::StrCat("--prefill-chunk: must be positive, got ", absl::GetFlag(FLAGS_prefill_chunk))));
  }
  // The server's Engine with one slot: the request runs exactly as it would when served.
  auto engine = mcserve::cli::OneSlotEngine(**model, *store_options, absl::GetFlag(FLAGS_prefill_chunk));
  if (!engine.ok()) return Fail(engine.status());

  mcserve::engine::RequestSpec spec;
  spec.prompt = *std::move(prompt);
  spec.sampling.temperature = static_cast<float>(absl::GetFlag(FLAGS_temperature));
  spec.sampling.top_p = static_cast<float>(absl::GetFlag(FLAGS_top_p));
  spec.sampling.top_k = absl::GetFlag(FLAGS_top_k);
  if (absl::GetFlag(FLAGS_seed) >= 0) spec.sampling.seed = absl::GetFlag(FLAGS_seed);
  spec.stop.max_tokens = absl::GetFlag(FLAGS_max_tokens);
  spec.stop.ignore_eos = false;  // EOS ends the text (and is not printed)
  auto handle = (*engine)->Submit(std::move(spec));
  if (!handle.ok()) return Fail(handle.status());
  // Stream the engine's output events: each carries the text its token completed.
  for (;;) {
    auto event = (*handle)->Next(absl::InfiniteDuration());
    if (!event.ok()) return Fail(event.status());
    std::fwrite(event->text.data(), 1, event->text.size(), stdout);
    std::fflush(stdout);
    if (!event->is_final()) continue;
    if (!event->error.ok()) return Fail(event->error);
    break;
  }
  std::fputc('\n', stdout);
  if ((*model)->config().memory_caching) {
    const auto stats = (*engine)->Stats().runner;  // after the request: its pages are released
    std::fprintf(stderr, "mcserve-run: checkpoints: %lld on the device tier, %lld on the host tier, %lld staged\n",
                 static_cast<long long>(stats.device_pages), static_cast<long long>(stats.host_pages),
                 static_cast<long long>(stats.stagings));
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  mcserve::engine::PrepareCpuLibraries(argv);  // may re-execute: before anything else
  std::vector<std::string> storage;
  std::vector<char*> args = mcserve::cli::NormalizeFlagNames(argc, argv, &storage);
  mcserve::cli::SetToolUsage("tools/run/", "mcserve-run --model DIR --prompt TEXT [--max-tokens N] [--temperature T] "
                               "[--top-p P] [--seed S] [--mc-aggregation A ...]: generate text offline and stream it to stdout.\n"
                               "Flags may be written with dashes or underscores (--max-tokens = --max_tokens).");
  absl::ParseCommandLine(static_cast<int>(args.size()), args.data());
  return Run();
}
