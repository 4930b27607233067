// mcserve-run: offline generation. Loads a model directory, prefills a prompt and streams the
// generated text to stdout as it is produced.
#include <cstdio>
#include <iostream>
#include <map>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/flags/usage_config.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "engine/model/tokenizer.h"
#include "engine/runner/generate.h"
#include "engine/runner/model.h"
#include "kernels/core/status_macros.h"
#include "kernels/cuda/device_runtime.h"

ABSL_FLAG(std::string, model, "", "Model directory (config.json, model.safetensors, tokenizer.model); "
                                  "default: the bundled model");
ABSL_FLAG(std::string, prompt, "", "Prompt text (UTF-8)");
ABSL_FLAG(int, max_tokens, 64, "Maximum number of tokens to generate");
ABSL_FLAG(double, temperature, 0.8, "Sampling temperature; 0 = greedy");
ABSL_FLAG(double, top_p, 1.0, "Nucleus sampling: keep the smallest set of tokens with this much mass");
ABSL_FLAG(int, top_k, 0, "Keep only the k most likely tokens; 0 = all");
ABSL_FLAG(int64_t, seed, -1, "Random seed for reproducible sampling; -1 = random");
ABSL_FLAG(int, threads, 0, "CPU threads; 0 = all cores");
ABSL_FLAG(std::string, device, "",
          "cpu, cuda, or cuda-emu (the CUDA kernels run by the CPU emulator, for tests); default: cuda when a "
          "GPU is present, else cpu");
ABSL_FLAG(int, prefill_chunk, 256, "Prompt tokens per prefill step");
// Memory Caching (docs/memory-caching.md); each overrides the model's config.json `memory_caching`.
ABSL_FLAG(std::string, mc_aggregation, "", "Memory Caching aggregation: residual, grm, soup, ssc, mean, or none (off)");
ABSL_FLAG(std::string, mc_segmentation, "", "Memory Caching segmentation: constant or logarithmic");
ABSL_FLAG(std::string, mc_segment_size, "", "Memory Caching segment size (constant segmentation)");
ABSL_FLAG(std::string, mc_init_mode, "", "Memory Caching init mode: independent or checkpoint");
ABSL_FLAG(std::string, mc_gate, "", "Memory Caching gate input: q or u_proj");
ABSL_FLAG(std::string, mc_pool, "", "Memory Caching key pooling: mean or sum");
ABSL_FLAG(std::string, mc_top_k, "", "Memory Caching: segments SSC's router keeps per token");
ABSL_FLAG(std::string, mc_mean_combine, "", "Memory Caching mean aggregation: add or average");
ABSL_FLAG(double, checkpoint_device_mib, -1,
          "Memory Caching checkpoints: MiB of memories kept on the device tier; the rest go to the host "
          "tier. -1 = unlimited");
ABSL_FLAG(double, checkpoint_host_mib, -1, "Memory Caching checkpoints: MiB of the host tier; -1 = unlimited");
ABSL_FLAG(int, ssc_hot_pages, 32,
          "SSC: host-tier checkpoint pages kept staged on the device per layer between steps");
ABSL_FLAG(std::string, mc_layers, "", "Memory Caching layers: all, or a comma-separated list of indices");

namespace {

using mcserve::engine::Model;

int Fail(const absl::Status& status) {
  std::fprintf(stderr, "mcserve-run: %s\n", std::string(status.message()).c_str());
  return 1;
}

// The --mc-* flags that were given, as Memory Caching overrides.
std::map<std::string, std::string> McOverrides() {
  std::map<std::string, std::string> overrides;
  const std::pair<const char*, const absl::Flag<std::string>*> flags[] = {
      {"aggregation", &FLAGS_mc_aggregation}, {"segmentation", &FLAGS_mc_segmentation},
      {"segment_size", &FLAGS_mc_segment_size}, {"init_mode", &FLAGS_mc_init_mode}, {"gate", &FLAGS_mc_gate},
      {"pool", &FLAGS_mc_pool}, {"top_k", &FLAGS_mc_top_k}, {"mean_combine", &FLAGS_mc_mean_combine},
      {"layers", &FLAGS_mc_layers}};
  for (const auto& [field, flag] : flags) {
    const std::string value = absl::GetFlag(*flag);
    if (!value.empty()) overrides[field] = value;
  }
  return overrides;
}

// `status` with "--<flag>: " in front of its message.
absl::Status ForFlag(const char* flag, const absl::Status& status) {
  return absl::Status(status.code(), absl::StrCat("--", flag, ": ", status.message()));
}

// --checkpoint-*-mib and --ssc-hot-pages as store options.
absl::StatusOr<mcserve::engine::CheckpointStoreOptions> CheckpointOptions() {
  mcserve::engine::CheckpointStoreOptions options;
  auto device = mcserve::engine::BudgetBytesFromMib(absl::GetFlag(FLAGS_checkpoint_device_mib));
  if (!device.ok()) return ForFlag("checkpoint-device-mib", device.status());
  auto host = mcserve::engine::BudgetBytesFromMib(absl::GetFlag(FLAGS_checkpoint_host_mib));
  if (!host.ok()) return ForFlag("checkpoint-host-mib", host.status());
  options.device_bytes = *device;
  options.host_bytes = *host;
  options.hot_pages = absl::GetFlag(FLAGS_ssc_hot_pages);
  if (options.hot_pages < 0) {
    return absl::InvalidArgumentError(absl::StrCat("--ssc-hot-pages: ", options.hot_pages, " is negative"));
  }
  return options;
}

// --device, resolved: the default is cuda when a GPU is usable, else cpu.
absl::StatusOr<mcserve::kernels::Device> ChosenDevice() {
  auto device = mcserve::kernels::DeviceFromName(absl::GetFlag(FLAGS_device));
  if (!device.ok()) return ForFlag("device", device.status());
  return *device;
}

int Run() {
  std::string dir = absl::GetFlag(FLAGS_model);
  if (dir.empty()) dir = MCSERVE_DEFAULT_MODEL;
  auto device = ChosenDevice();
  if (!device.ok()) return Fail(device.status());
  auto model = Model::Load(dir, {.device = *device, .num_threads = absl::GetFlag(FLAGS_threads),
                                 .mc_overrides = McOverrides()});
  if (!model.ok()) return Fail(model.status());
  const auto& tokenizer = (*model)->tokenizer();
  auto prompt = tokenizer.Encode(absl::GetFlag(FLAGS_prompt), /*add_bos=*/true);
  if (!prompt.ok()) return Fail(absl::InvalidArgumentError(absl::StrCat("--prompt: ", prompt.status().message())));
  if (const auto& mc = (*model)->config().memory_caching) {
    std::fprintf(stderr, "mcserve-run: memory caching: %s\n", mcserve::engine::DescribeMcConfig(*mc).c_str());
  }
  auto store_options = CheckpointOptions();
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

// Accepts the dashed spelling of every flag (--max-tokens) as well as absl's (--max_tokens).
static std::vector<char*> NormalizeFlagNames(int argc, char** argv, std::vector<std::string>* storage) {
  storage->reserve(argc);
  std::vector<char*> out;
  for (int i = 0; i < argc; ++i) {
    std::string arg = argv[i];
    if (i > 0 && arg.rfind("--", 0) == 0) {
      const size_t end = std::min(arg.find('='), arg.size());
      for (size_t j = 2; j < end; ++j) {
        if (arg[j] == '-') arg[j] = '_';
      }
    }
    storage->push_back(std::move(arg));
    out.push_back(storage->back().data());
  }
  return out;
}

int main(int argc, char** argv) {
  std::vector<std::string> storage;
  std::vector<char*> args = NormalizeFlagNames(argc, argv, &storage);
  // --help lists this file's flags (absl would otherwise look for a file named like the binary).
  absl::FlagsUsageConfig usage;
  usage.contains_help_flags = [](absl::string_view file) { return absl::EndsWith(file, "tools/run/main.cc"); };
  absl::SetFlagsUsageConfig(usage);
  absl::SetProgramUsageMessage("mcserve-run --model DIR --prompt TEXT [--max-tokens N] [--temperature T] "
                               "[--top-p P] [--seed S] [--mc-aggregation A ...]: generate text offline and stream it to stdout.\n"
                               "Flags may be written with dashes or underscores (--max-tokens = --max_tokens).");
  absl::ParseCommandLine(static_cast<int>(args.size()), args.data());
  return Run();
}
