// mcserve-run: offline generation. Loads a model directory, prefills a prompt and streams the
// generated text to stdout as it is produced.
#include <cstdio>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_cat.h"
#include "engine/model/tokenizer.h"
#include "engine/runner/generate.h"
#include "engine/runner/model.h"
#include "base/status_macros.h"
#include "cli/command_line.h"
#include "cli/mc_flags.h"
#include "cli/model_flags.h"

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
  auto pool = (*model)->NewStatePool(1, *store_options);
  if (!pool.ok()) return Fail(pool.status());
  auto slot = pool->Acquire();
  if (!slot.ok()) return Fail(slot.status());

  mcserve::engine::GenerateOptions options;
  options.max_tokens = absl::GetFlag(FLAGS_max_tokens);
  options.prefill_chunk = absl::GetFlag(FLAGS_prefill_chunk);
  options.sampling.temperature = static_cast<float>(absl::GetFlag(FLAGS_temperature));
  options.sampling.top_p = static_cast<float>(absl::GetFlag(FLAGS_top_p));
  options.sampling.top_k = absl::GetFlag(FLAGS_top_k);
  if (absl::GetFlag(FLAGS_seed) >= 0) options.sampling.seed = absl::GetFlag(FLAGS_seed);

  mcserve::engine::IncrementalDetokenizer detok(&tokenizer);
  if (absl::Status context = detok.SetContext(*prompt); !context.ok()) return Fail(context);
  absl::Status stream_error;
  const int32_t eos = static_cast<int32_t>((*model)->config().eos_token_id);
  auto generated = mcserve::engine::Generate(**model, *pool, *slot, *prompt, options, [&](int32_t id) {
    if (id == eos) return false;
    auto text = detok.Push(id);
    if (!text.ok()) {
      stream_error = text.status();
      return false;
    }
    std::fwrite(text->data(), 1, text->size(), stdout);
    std::fflush(stdout);
    return true;
  });
  if (!generated.ok()) return Fail(generated.status());
  if (!stream_error.ok()) return Fail(stream_error);
  const std::string rest = detok.Flush();
  std::fwrite(rest.data(), 1, rest.size(), stdout);
  std::fputc('\n', stdout);
  if ((*model)->config().memory_caching) {
    const auto stats = pool->checkpoints().stats();
    std::fprintf(stderr, "mcserve-run: checkpoints: %lld on the device tier, %lld on the host tier, %lld staged\n",
                 static_cast<long long>(stats.device_pages), static_cast<long long>(stats.host_pages),
                 static_cast<long long>(stats.stagings));
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> storage;
  std::vector<char*> args = mcserve::cli::NormalizeFlagNames(argc, argv, &storage);
  mcserve::cli::SetToolUsage("tools/run/", "mcserve-run --model DIR --prompt TEXT [--max-tokens N] [--temperature T] "
                               "[--top-p P] [--seed S] [--mc-aggregation A ...]: generate text offline and stream it to stdout.\n"
                               "Flags may be written with dashes or underscores (--max-tokens = --max_tokens).");
  absl::ParseCommandLine(static_cast<int>(args.size()), args.data());
  return Run();
}
