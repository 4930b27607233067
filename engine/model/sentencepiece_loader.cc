#include "engine/model/sentencepiece_loader.h"

#include <dlfcn.h>
#include <unistd.h>

#include <cstdlib>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

#ifndef MCSERVE_SENTENCEPIECE_MODULE_BUILD_PATH
#define MCSERVE_SENTENCEPIECE_MODULE_BUILD_PATH ""
#endif

namespace mcserve::engine::internal {
namespace {

// Why RTLD_LOCAL | RTLD_DEEPBIND: docs/architecture.md. The sanitizer runtimes refuse RTLD_DEEPBIND;
// their builds go without, and then refuse to load the module into a process that has a protobuf.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define MCSERVE_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define MCSERVE_SANITIZED 1
#endif
#endif
#ifdef MCSERVE_SANITIZED
constexpr bool kDeepBind = false;
#else
constexpr bool kDeepBind = true;
#endif
constexpr int kDlopenFlags = RTLD_NOW | RTLD_LOCAL | (kDeepBind ? RTLD_DEEPBIND : 0);

// A symbol both libprotobuf and libsentencepiece's bundled protobuf-lite define.
constexpr char kProtobufProbe[] = "_ZN6google8protobuf11MessageLite14ParseFromArrayEPKvi";

}  // namespace

std::vector<std::string> SentencePieceModuleCandidates() {
  if (const char* env = std::getenv(kSentencePieceModuleEnv); env != nullptr && *env != '\0') return {env};
  std::vector<std::string> candidates;
  char self[4096];
  const ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
  if (n > 0) {
    std::string dir(self, static_cast<size_t>(n));
    dir = dir.substr(0, dir.rfind('/') + 1);
    candidates.push_back(dir + kSentencePieceModuleName);
    candidates.push_back(dir + "../lib/mcserve/" + kSentencePieceModuleName);
  }
  if (*MCSERVE_SENTENCEPIECE_MODULE_BUILD_PATH != '\0') candidates.push_back(MCSERVE_SENTENCEPIECE_MODULE_BUILD_PATH);
  return candidates;
}

bool SentencePieceModuleDeepBinds() { return kDeepBind; }

absl::StatusOr<NewSentencePieceModelFn> OpenSentencePieceModule(const std::vector<std::string>& candidates) {
  if (!kDeepBind && dlsym(RTLD_DEFAULT, kProtobufProbe) != nullptr) {
    return absl::FailedPreconditionError(
        "cannot load the SentencePiece module in a sanitizer build of a process that links protobuf: without "
        "RTLD_DEEPBIND (which the sanitizers refuse) SentencePiece would bind to that protobuf");
  }
  std::vector<std::string> tried;
  for (const std::string& path : candidates) {
    if (access(path.c_str(), R_OK) != 0) {
      tried.push_back(absl::StrCat(path, " (not found)"));
      continue;
    }
    void* handle = dlopen(path.c_str(), kDlopenFlags);  // never closed: models may live until exit
    if (handle == nullptr) {
      const char* error = dlerror();
      tried.push_back(absl::StrCat(path, " (", error != nullptr ? error : "dlopen failed", ")"));
      continue;
    }
    auto entry = reinterpret_cast<NewSentencePieceModelFn>(dlsym(handle, kNewSentencePieceModelSymbol));
    if (entry == nullptr) {
      tried.push_back(absl::StrCat(path, " (no symbol ", kNewSentencePieceModelSymbol, ")"));
      continue;
    }
    return entry;
  }
  return absl::FailedPreconditionError(
      absl::StrCat("cannot load the SentencePiece module ", kSentencePieceModuleName,
                   "; tried: ", tried.empty() ? std::string("no path") : absl::StrJoin(tried, ", "), " (set ",
                   kSentencePieceModuleEnv, " to its path)"));
}

absl::StatusOr<std::unique_ptr<SentencePieceModel>> NewSentencePieceModel() {
  static const absl::StatusOr<NewSentencePieceModelFn>* const module =
      new absl::StatusOr<NewSentencePieceModelFn>(OpenSentencePieceModule(SentencePieceModuleCandidates()));
  if (!module->ok()) return module->status();
  SentencePieceModel* model = (**module)(kSentencePieceModuleAbi);
  if (model == nullptr) {
    return absl::FailedPreconditionError(absl::StrCat("the SentencePiece module ", kSentencePieceModuleName,
                                                      " does not speak interface version ", kSentencePieceModuleAbi,
                                                      " (a module from another build?)"));
  }
  return std::unique_ptr<SentencePieceModel>(model);
}

}  // namespace mcserve::engine::internal
