#include "server/grpc/generation_service.h"

#include <algorithm>
#include <memory>
#include <condition_variable>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "engine/model/mc_config.h"
#include "engine/model/tokenizer.h"
#include "server/grpc/request_decoder.h"

namespace mcserve::server {
namespace {

using engine::FinishReason;
using engine::OutputEvent;

constexpr absl::Duration kPollSlice = absl::Milliseconds(100);
constexpr int kMaxEventsPerResponse = 64;

v1::FinishReason ToProto(FinishReason reason) {
  switch (reason) {
    case FinishReason::kLength: return v1::FINISH_REASON_LENGTH;
    case FinishReason::kStop: return v1::FINISH_REASON_STOP;
    case FinishReason::kCancelled: return v1::FINISH_REASON_CANCELLED;
    default: return v1::FINISH_REASON_UNSPECIFIED;
  }
}

// A Generate call that fails before it starts: finishes at once with `status`.
class FailedWriteReactor : public grpc::ServerWriteReactor<grpc::ByteBuffer> {
 public:
  explicit FailedWriteReactor(grpc::Status status) { Finish(std::move(status)); }
  void OnDone() override { delete this; }
};

// A unary call's reactor finished with `status`.
grpc::ServerUnaryReactor* FinishUnary(grpc::CallbackServerContext* context, grpc::Status status) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  reactor->Finish(std::move(status));
  return reactor;
}

}  // namespace

grpc::Status ToGrpcStatus(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()), std::string(status.message()));
}


// One Generate stream: see the threading note in the header. The pump thread is the only caller of
// StartWrite / Finish; OnWriteDone / OnCancel only flip flags and wake it; OnDone joins it (it has
// already called Finish, its last action) and deletes the reactor.
class GenerationService::GenerateReactor : public grpc::ServerWriteReactor<grpc::ByteBuffer> {
 public:
  GenerateReactor(GenerationService* service, std::shared_ptr<engine::RequestHandle> handle,
                  std::string request_id, int64_t prompt_tokens, bool want_logprobs, absl::Time start)
      : service_(service), handle_(std::move(handle)), request_id_(std::move(request_id)),
        prompt_tokens_(prompt_tokens), want_logprobs_(want_logprobs), start_(start) {
    service_->active_streams_.fetch_add(1);
    thread_ = std::thread([this] { Pump(); });
  }

  void OnWriteDone(bool ok) override {
    std::lock_guard<std::mutex> lock(mu_);
    writing_ = false;
    if (!ok) broken_ = true;
    cv_.notify_all();
  }

  void OnCancel() override {
    handle_->Abort();
    std::lock_guard<std::mutex> lock(mu_);
    broken_ = true;
    cv_.notify_all();
  }

  void OnDone() override {
    // The pump's last action was Finish; should gRPC run OnDone inline on it, don't join oneself.
    if (thread_.get_id() == std::this_thread::get_id()) {
      thread_.detach();
    } else if (thread_.joinable()) {
      thread_.join();
    }
    service_->Unregister(request_id_);
    service_->active_streams_.fetch_sub(1);
    delete this;
  }

 private:
  // Waits until no write is in flight; false if the call is broken (cancelled or a write failed).
  bool WaitWritable() {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [this] { return !writing_ || broken_; });
    return !broken_;
  }

  bool Broken() {
    std::lock_guard<std::mutex> lock(mu_);
    return broken_;
  }

  void Write() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      writing_ = true;
    }
    EncodeResponse(response_, &buffer_);
    StartWrite(&buffer_);
  }

  // Adds one non-final or final event to response_.
  void Append(const OutputEvent& event) {
    if (event.cached_prompt_tokens >= 0) cached_prompt_tokens_ = event.cached_prompt_tokens;
    if (event.token_id >= 0) {
      if (generated_ == 0) first_token_ = absl::Now();
      ++generated_;
      response_.add_token_ids(event.token_id);
      if (want_logprobs_) {
        v1::TokenLogprobs* lp = response_.add_logprobs();
        lp->set_token_id(event.token_id);
        lp->set_logprob(event.logprob);
        for (const auto& top : event.top) {
          v1::TopLogprob* t = lp->add_top();
          t->set_token_id(top.id);
          t->set_logprob(top.logprob);
        }
      }
    }
    response_.mutable_text()->append(event.text);
    response_.set_generated_tokens(static_cast<uint32_t>(generated_));
  }

  void Complete(const OutputEvent& event) {
    v1::Completion* done = response_.mutable_complete();
    done->set_finish_reason(ToProto(event.finish));
    done->set_stop_string(event.stop);
    if (event.stop_token.has_value()) done->set_stop_token_id(*event.stop_token);
    done->set_prompt_tokens(static_cast<uint32_t>(prompt_tokens_));
    done->set_cached_prompt_tokens(static_cast<uint32_t>(std::max<int64_t>(cached_prompt_tokens_, 0)));
    done->set_generated_tokens(static_cast<uint32_t>(generated_));
    if (generated_ > 0) done->set_time_to_first_token_seconds(absl::ToDoubleSeconds(first_token_ - start_));
    done->set_e2e_seconds(absl::ToDoubleSeconds(absl::Now() - start_));
    service_->FillCheckpointStats(service_->engine_->Stats().runner, done->mutable_checkpoints());
  }

  void Pump() {
    // The first response: the request id, so the client can Abort during prefill.
    response_.set_request_id(request_id_);
    Write();
    while (true) {
      if (!WaitWritable()) {
        handle_->Abort();
        Finish(grpc::Status(grpc::StatusCode::CANCELLED, "the call was cancelled"));
        return;
      }
      absl::StatusOr<OutputEvent> event = handle_->Next(kPollSlice);
      if (absl::IsDeadlineExceeded(event.status())) continue;  // re-checks cancellation
      if (!event.ok()) {
        Finish(ToGrpcStatus(event.status()));
        return;
      }
      response_.Clear();
      response_.set_request_id(request_id_);
      // Coalesce what is already queued into this response.
      for (int n = 1;; ++n) {
        if (event->finish == FinishReason::kError) {
          Finish(ToGrpcStatus(event->error.ok() ? absl::InternalError("generation failed") : event->error));
          return;
        }
        Append(*event);
        if (event->is_final()) {
          Complete(*event);
          {
            std::lock_guard<std::mutex> lock(mu_);
            writing_ = true;
          }
          EncodeResponse(response_, &buffer_);
          StartWriteAndFinish(&buffer_, grpc::WriteOptions(), grpc::Status::OK);
          return;
        }
        if (n >= kMaxEventsPerResponse) break;
        event = handle_->Next(absl::ZeroDuration());
        if (!event.ok()) break;
      }
      Write();
    }
  }

  GenerationService* const service_;
  const std::shared_ptr<engine::RequestHandle> handle_;
  const std::string request_id_;
  const int64_t prompt_tokens_;
  const bool want_logprobs_;
  const absl::Time start_;
  absl::Time first_token_;
  int64_t generated_ = 0;
  int64_t cached_prompt_tokens_ = -1;
  v1::GenerateResponse response_;  // being built
  grpc::ByteBuffer buffer_;        // response_ serialized: the one write in flight
  std::mutex mu_;
  std::condition_variable cv_;
  bool writing_ = false;
  bool broken_ = false;
  std::thread thread_;
};

GenerationService::GenerationService(engine::Engine* engine, const engine::Model* model,
                                     GenerationServiceOptions options)
    : engine_(engine), model_(model), options_(std::move(options)), started_(absl::Now()) {}

GenerationService::~GenerationService() = default;

grpc::Status GenerationService::Authenticate(const grpc::CallbackServerContext* context) const {
  if (options_.api_key.empty()) return grpc::Status::OK;
  const auto& metadata = context->client_metadata();
  const auto it = metadata.find("authorization");
  const std::string expected = "Bearer " + options_.api_key;
  if (it != metadata.end()) {
    const grpc::string_ref got = it->second;
    // Constant-time over the expected length.
    unsigned char diff = got.size() == expected.size() ? 0 : 1;
    for (size_t i = 0; i < expected.size(); ++i) {
      diff |= static_cast<unsigned char>(expected[i] ^ (i < got.size() ? got.data()[i] : 0));
    }
    if (diff == 0) return grpc::Status::OK;
  }
  return grpc::Status(grpc::StatusCode::UNAUTHENTICATED,
                      "missing or wrong API key: send metadata `authorization: Bearer <key>`");
}

absl::StatusOr<engine::RequestSpec> GenerationService::BuildSpec(const v1::GenerateRequest& request) const {
  engine::RequestSpec spec;
  const engine::Tokenizer& tokenizer = model_->tokenizer();
  switch (request.prompt_case()) {
    case v1::GenerateRequest::kText: {
      const std::string& text = request.text();
      if (text.empty()) return absl::InvalidArgumentError("text: the prompt is empty");
      if (!engine::IsValidUtf8(text)) return absl::InvalidArgumentError("text: the prompt is not valid UTF-8");
      auto ids = tokenizer.Encode(text, /*add_bos=*/true);
      if (!ids.ok()) return absl::InvalidArgumentError(absl::StrCat("text: ", ids.status().message()));
      spec.prompt = std::move(*ids);
      break;
    }
    case v1::GenerateRequest::kTokenIds:
      if (request.token_ids().ids().empty()) return absl::InvalidArgumentError("token_ids: the prompt is empty");
      spec.prompt.assign(request.token_ids().ids().begin(), request.token_ids().ids().end());
      break;
    default:
      return absl::InvalidArgumentError("prompt: set `text` or `token_ids`");
  }
  const v1::SamplingParams& s = request.sampling();
  if (s.has_temperature()) spec.sampling.temperature = s.temperature();
  if (s.has_top_p()) spec.sampling.top_p = s.top_p();
  spec.sampling.top_k = s.top_k();
  spec.sampling.min_p = s.min_p();
  if (s.has_repetition_penalty()) spec.sampling.repetition_penalty = s.repetition_penalty();
  spec.sampling.presence_penalty = s.presence_penalty();
  spec.sampling.frequency_penalty = s.frequency_penalty();
  for (const auto& [id, bias] : s.logit_bias()) spec.sampling.logit_bias.emplace_back(id, bias);
  std::sort(spec.sampling.logit_bias.begin(), spec.sampling.logit_bias.end());
  if (s.has_seed()) spec.sampling.seed = s.seed();
  if (request.logprobs() > 20) {
    return absl::InvalidArgumentError(absl::StrCat("logprobs must be in [0, 20], got ", request.logprobs()));
  }
  spec.sampling.logprobs = static_cast<int>(request.logprobs());

  const v1::StopParams& stop = request.stop();
  if (stop.has_max_tokens()) {
    if (stop.max_tokens() > options_.max_tokens_limit) {
      return absl::InvalidArgumentError(absl::StrCat("max_tokens: ", stop.max_tokens(),
                                                     " exceeds the server's limit (--max-tokens-limit=",
                                                     options_.max_tokens_limit, ")"));
    }
    spec.stop.max_tokens = static_cast<int>(stop.max_tokens());
  }
  if (stop.min_tokens() > options_.max_tokens_limit) {
    return absl::InvalidArgumentError(absl::StrCat("min_tokens: ", stop.min_tokens(), " exceeds the server's limit"));
  }
  spec.stop.min_tokens = static_cast<int>(stop.min_tokens());
  spec.stop.stop_token_ids.assign(stop.stop_token_ids().begin(), stop.stop_token_ids().end());
  for (int i = 0; i < stop.stop_token_ids_size(); ++i) {
    const int32_t id = stop.stop_token_ids(i);
    if (id < 0 || id >= tokenizer.vocab_size()) {
      return absl::InvalidArgumentError(absl::StrCat("stop_token_ids[", i, "]: ", id, " is outside [0, ",
                                                     tokenizer.vocab_size(), ")"));
    }
  }
  spec.stop.stop_strings.assign(stop.stop().begin(), stop.stop().end());
  spec.stop.ignore_eos = stop.ignore_eos();
  spec.stop.include_stop_string = stop.include_stop_str_in_output();
  spec.client_id = request.request_id();
  return spec;
}

absl::Status GenerationService::Register(const std::string& request_id, uint64_t engine_id) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!ids_.emplace(request_id, engine_id).second) {
    return absl::AlreadyExistsError(absl::StrCat("request_id: \"", request_id, "\" is already in flight"));
  }
  return absl::OkStatus();
}

void GenerationService::Unregister(const std::string& request_id) {
  std::lock_guard<std::mutex> lock(mu_);
  ids_.erase(request_id);
}

void GenerationService::FillCheckpointStats(const engine::RunnerStats& stats, v1::CheckpointStats* out) const {
  out->set_device_pages(stats.device_pages);
  out->set_host_pages(stats.host_pages);
  out->set_referenced_pages(stats.referenced_pages);
  out->set_stagings(stats.stagings);
  out->set_prefix_hits(stats.prefix_hits);
  out->set_prefix_misses(stats.prefix_misses);
  out->set_prefix_cached_tokens(stats.prefix_cached_tokens);
  out->set_evictions(stats.evictions);
}

grpc::ServerWriteReactor<grpc::ByteBuffer>* GenerationService::Generate(grpc::CallbackServerContext* context,
                                                                        const grpc::ByteBuffer* raw_request) {
  const absl::Time start = absl::Now();
  if (grpc::Status auth = Authenticate(context); !auth.ok()) return new FailedWriteReactor(auth);
  if (!admitting_) {
    return new FailedWriteReactor(grpc::Status(grpc::StatusCode::UNAVAILABLE, "the server is shutting down"));
  }
  auto request = std::make_unique<v1::GenerateRequest>();
  if (absl::Status s = DecodeRequest(*raw_request, options_.max_request_bytes, request.get()); !s.ok()) {
    return new FailedWriteReactor(ToGrpcStatus(s));
  }
  absl::StatusOr<engine::RequestSpec> spec = BuildSpec(*request);
  if (!spec.ok()) return new FailedWriteReactor(ToGrpcStatus(spec.status()));
  const int64_t prompt_tokens = static_cast<int64_t>(spec->prompt.size());
  auto handle = engine_->Submit(*std::move(spec));
  if (!handle.ok()) return new FailedWriteReactor(ToGrpcStatus(handle.status()));
  std::string request_id = request->request_id();
  if (request_id.empty()) request_id = absl::StrCat("req-", (*handle)->id());
  if (absl::Status s = Register(request_id, (*handle)->id()); !s.ok()) {
    return new FailedWriteReactor(ToGrpcStatus(s));  // the handle's destructor aborts the request
  }
  return new GenerateReactor(this, *std::move(handle), request_id, prompt_tokens, request->logprobs() > 0, start);
}

grpc::ServerUnaryReactor* GenerationService::Abort(grpc::CallbackServerContext* context,
                                                   const v1::AbortRequest* request, v1::AbortResponse*) {
  if (grpc::Status auth = Authenticate(context); !auth.ok()) return FinishUnary(context, auth);
  if (request->request_id().empty()) {
    return FinishUnary(context, grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "request_id is empty"));
  }
  uint64_t id = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    const auto it = ids_.find(request->request_id());
    if (it == ids_.end()) {
      return FinishUnary(context, grpc::Status(grpc::StatusCode::NOT_FOUND,
                                               absl::StrCat("request_id: no request \"", request->request_id(),
                                                            "\" in flight")));
    }
    id = it->second;
  }
  absl::Status aborted = engine_->Abort(id);
  if (absl::IsNotFound(aborted)) {  // it finished between the lookup and the abort
    aborted = absl::NotFoundError(absl::StrCat("request_id: request \"", request->request_id(), "\" already finished"));
  }
  return FinishUnary(context, ToGrpcStatus(aborted));
}

grpc::ServerUnaryReactor* GenerationService::Tokenize(grpc::CallbackServerContext* context,
                                                      const v1::TokenizeRequest* request,
                                                      v1::TokenizeResponse* response) {
  if (grpc::Status auth = Authenticate(context); !auth.ok()) return FinishUnary(context, auth);
  if (!engine::IsValidUtf8(request->text())) {
    return FinishUnary(context, grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "text: not valid UTF-8"));
  }
  auto ids = model_->tokenizer().Encode(request->text(), request->add_bos());
  if (!ids.ok()) {
    return FinishUnary(context, grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                                             absl::StrCat("text: ", ids.status().message())));
  }
  response->mutable_token_ids()->Assign(ids->begin(), ids->end());
  return FinishUnary(context, grpc::Status::OK);
}

grpc::ServerUnaryReactor* GenerationService::GetModelInfo(grpc::CallbackServerContext* context,
                                                          const v1::GetModelInfoRequest*, v1::ModelInfo* response) {
  if (grpc::Status auth = Authenticate(context); !auth.ok()) return FinishUnary(context, auth);
  const engine::ModelConfig& config = model_->config();
  response->set_model_path(options_.model_path);
  response->set_family(config.model_type);  // as config.json names it (dla, titans, ...)
  response->set_model_type(config.model_type);
  response->set_num_layers(config.num_hidden_layers);
  response->set_hidden_size(config.hidden_size);
  response->set_vocab_size(config.vocab_size);
  if (config.memory_caching.has_value()) {
    response->set_memory_caching(engine::DescribeMcConfig(*config.memory_caching));
    response->set_mc_segment_size(config.memory_caching->segment_size);
  }
  const engine::EngineStats stats = engine_->Stats();
  response->set_num_slots(stats.slots_total);
  response->set_max_running_requests(engine_->EffectiveConcurrency());
  response->set_max_prompt_tokens(options_.max_prompt_tokens);
  response->set_max_tokens_limit(options_.max_tokens_limit);
  response->set_bos_token_id(static_cast<int32_t>(config.bos_token_id));
  response->set_eos_token_id(static_cast<int32_t>(config.eos_token_id));
  return FinishUnary(context, grpc::Status::OK);
}

grpc::ServerUnaryReactor* GenerationService::GetServerInfo(grpc::CallbackServerContext* context,
                                                           const v1::GetServerInfoRequest*,
                                                           v1::ServerInfo* response) {
  if (grpc::Status auth = Authenticate(context); !auth.ok()) return FinishUnary(context, auth);
  const engine::EngineStats stats = engine_->Stats();
  response->set_version(options_.version);
  response->set_uptime_seconds(absl::ToDoubleSeconds(absl::Now() - started_));
  response->set_slots_total(stats.slots_total);
  response->set_slots_used(stats.slots_used);
  response->set_waiting(stats.waiting);
  response->set_running(stats.running);
  response->set_steps(stats.steps);
  response->set_tokens_generated(stats.tokens_generated);
  response->set_prompt_tokens_processed(stats.prompt_tokens_processed);
  response->set_prompt_tokens_cached(stats.prompt_tokens_cached);
  response->set_finished_length(stats.finished_by(FinishReason::kLength));
  response->set_finished_stop(stats.finished_by(FinishReason::kStop));
  response->set_finished_cancelled(stats.finished_by(FinishReason::kCancelled));
  response->set_finished_error(stats.finished_by(FinishReason::kError));
  FillCheckpointStats(stats.runner, response->mutable_checkpoints());
  response->set_serving(admitting_);
  return FinishUnary(context, grpc::Status::OK);
}

}  // namespace mcserve::server
