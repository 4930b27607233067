#include "server/grpc/generation_service.h"

#include <algorithm>
#include <limits>
#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "engine/mc/mc_config.h"
#include "engine/model/tokenizer.h"
#include "server/grpc/prompt_tokenizer.h"
#include "server/grpc/proto_convert.h"
#include "server/grpc/request_decoder.h"

namespace mcserve::server {
namespace {

using engine::FinishReason;

// A Generate call that fails before it starts: finishes at once with `status`.
class FailedWriteReactor : public grpc::ServerWriteReactor<grpc::ByteBuffer> {
 public:
  explicit FailedWriteReactor(grpc::Status status) { Finish(std::move(status)); }
  void OnDone() override { delete this; }
};

// A proto uint32 as the engine's int, saturated (the engine's limits are far below INT32_MAX, so a
// saturated value is refused like the value sent).
int SaturatedInt(uint32_t v) { return static_cast<int>(std::min<uint32_t>(v, std::numeric_limits<int32_t>::max())); }

}  // namespace

GenerationService::GenerationService(engine::Engine* engine, const engine::Model* model,
                                     GenerationServiceOptions options)
    : engine_(engine),
      model_(model),
      options_(std::move(options)),
      authenticator_(options_.api_keys, options_.accounting),
      started_(absl::Now()),
      registry_(/*bind_server_ids=*/options_.api_keys.enabled()) {
  stream_env_.engine = engine_;
  stream_env_.registry = &registry_;
  stream_env_.accounting = options_.accounting;
  stream_env_.active_streams = &active_streams_;
  stream_env_.write_timeout = options_.write_timeout;
}

GenerationService::~GenerationService() = default;

template <class Request, class Response, class Handler>
grpc::ServerUnaryReactor* GenerationService::Unary(grpc::CallbackServerContext* context,
                                                   const grpc::ByteBuffer& raw_request,
                                                   grpc::ByteBuffer* raw_response, Handler handler) {
  const absl::Status status = [&]() -> absl::Status {
    absl::StatusOr<Caller> caller = authenticator_.Identify(*context);
    if (!caller.ok()) return caller.status();
    Request request;
    if (absl::Status s = DecodeRequest(raw_request, options_.max_request_bytes, &request); !s.ok()) return s;
    Response response;
    if (absl::Status s = handler(*caller, request, &response); !s.ok()) return s;
    EncodeResponse(response, raw_response);
    return absl::OkStatus();
  }();
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  reactor->Finish(ToGrpcStatus(status));
  return reactor;
}

absl::StatusOr<engine::RequestSpec> GenerationService::BuildSpec(const v1::GenerateRequest& request) const {
  engine::RequestSpec spec;
  const engine::Tokenizer& tokenizer = model_->tokenizer();
  switch (request.prompt_case()) {
    case v1::GenerateRequest::kText: {
      if (request.text().empty()) return absl::InvalidArgumentError("text: the prompt is empty");
      auto ids = TokenizeWithinLimit(tokenizer, request.text(), /*add_bos=*/true,
                                     engine_->limits().max_prompt_tokens, "text");
      if (!ids.ok()) return ids.status();
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
  spec.sampling.logprobs = SaturatedInt(request.logprobs());

  const v1::StopParams& stop = request.stop();
  // The engine checks these against its limits (CheckRequest), as it does for every front end.
  if (stop.has_max_tokens()) spec.stop.max_tokens = SaturatedInt(stop.max_tokens());
  spec.stop.min_tokens = SaturatedInt(stop.min_tokens());
  spec.stop.stop_token_ids.assign(stop.stop_token_ids().begin(), stop.stop_token_ids().end());
  spec.stop.stop_strings.assign(stop.stop().begin(), stop.stop().end());
  spec.stop.ignore_eos = stop.ignore_eos();
  spec.stop.include_stop_string = stop.include_stop_str_in_output();
  spec.client_id = request.request_id();
  return spec;
}

grpc::ServerWriteReactor<grpc::ByteBuffer>* GenerationService::Generate(grpc::CallbackServerContext* context,
                                                                        const grpc::ByteBuffer* raw_request) {
  auto fail = [](const absl::Status& status) { return new FailedWriteReactor(ToGrpcStatus(status)); };
  GenerateStreamRequest out;
  out.start = absl::Now();
  absl::StatusOr<Caller> caller = authenticator_.Identify(*context);
  if (!caller.ok()) return fail(caller.status());
  out.caller = *std::move(caller);
  if (!admitting_) return fail(absl::UnavailableError("the server is shutting down"));
  v1::GenerateRequest request;
  if (absl::Status s = DecodeRequest(*raw_request, options_.max_request_bytes, &request); !s.ok()) return fail(s);
  absl::StatusOr<std::string> id = registry_.Reserve(out.caller.owner, request.request_id());
  if (!id.ok()) return fail(id.status());
  out.request_id = *std::move(id);
  absl::StatusOr<engine::RequestSpec> spec = BuildSpec(request);
  if (spec.ok()) out.prompt_tokens = static_cast<int64_t>(spec->prompt.size());
  absl::StatusOr<std::shared_ptr<engine::RequestHandle>> handle =
      spec.ok() ? engine_->Submit(*std::move(spec)) : spec.status();
  if (!handle.ok()) {
    registry_.Release(out.caller.owner, out.request_id);
    return fail(handle.status());
  }
  out.handle = *std::move(handle);
  registry_.Attach(out.caller.owner, out.request_id, out.handle->id());
  out.want_logprobs = request.logprobs() > 0;
  return new GenerateStream(context, stream_env_, std::move(out));
}

absl::Status GenerationService::AbortById(const Caller& caller, const v1::AbortRequest& request) const {
  const std::string& id = request.request_id();
  if (id.empty()) return absl::InvalidArgumentError("request_id is empty");
  absl::StatusOr<uint64_t> engine_id = registry_.Find(caller.owner, id);
  if (!engine_id.ok()) return engine_id.status();
  if (absl::Status aborted = engine_->Abort(*engine_id); !aborted.ok()) {
    // It finished between the lookup and the abort.
    return absl::IsNotFound(aborted) ? RequestRegistry::NotFound(id) : aborted;
  }
  if (options_.accounting != nullptr) options_.accounting->RequestAborted(caller.key_name);
  return absl::OkStatus();
}

absl::Status GenerationService::TokenizeText(const v1::TokenizeRequest& request,
                                             v1::TokenizeResponse* response) const {
  absl::StatusOr<std::vector<int32_t>> ids = TokenizeWithinLimit(model_->tokenizer(), request.text(), request.add_bos(),
                                                                 engine_->limits().max_prompt_tokens, "text");
  if (!ids.ok()) return ids.status();
  response->mutable_token_ids()->Assign(ids->begin(), ids->end());
  return absl::OkStatus();
}

void GenerationService::DescribeModel(v1::ModelInfo* response) const {
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
  response->set_max_prompt_tokens(engine_->limits().max_prompt_tokens);
  response->set_max_tokens_limit(static_cast<uint32_t>(engine_->limits().max_tokens_limit));
  response->set_bos_token_id(static_cast<int32_t>(config.bos_token_id));
  response->set_eos_token_id(static_cast<int32_t>(config.eos_token_id));
}

void GenerationService::DescribeServer(v1::ServerInfo* response) const {
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
}

grpc::ServerUnaryReactor* GenerationService::Abort(grpc::CallbackServerContext* context,
                                                   const grpc::ByteBuffer* raw_request, grpc::ByteBuffer* raw_response) {
  return Unary<v1::AbortRequest, v1::AbortResponse>(
      context, *raw_request, raw_response,
      [this](const Caller& caller, const v1::AbortRequest& request, v1::AbortResponse*) {
        return AbortById(caller, request);
      });
}

grpc::ServerUnaryReactor* GenerationService::Tokenize(grpc::CallbackServerContext* context,
                                                      const grpc::ByteBuffer* raw_request,
                                                      grpc::ByteBuffer* raw_response) {
  return Unary<v1::TokenizeRequest, v1::TokenizeResponse>(
      context, *raw_request, raw_response,
      [this](const Caller&, const v1::TokenizeRequest& request, v1::TokenizeResponse* response) {
        return TokenizeText(request, response);
      });
}

grpc::ServerUnaryReactor* GenerationService::GetModelInfo(grpc::CallbackServerContext* context,
                                                          const grpc::ByteBuffer* raw_request,
                                                          grpc::ByteBuffer* raw_response) {
  return Unary<v1::GetModelInfoRequest, v1::ModelInfo>(
      context, *raw_request, raw_response, [this](const Caller&, const v1::GetModelInfoRequest&, v1::ModelInfo* out) {
        DescribeModel(out);
        return absl::OkStatus();
      });
}

grpc::ServerUnaryReactor* GenerationService::GetServerInfo(grpc::CallbackServerContext* context,
                                                           const grpc::ByteBuffer* raw_request,
                                                           grpc::ByteBuffer* raw_response) {
  return Unary<v1::GetServerInfoRequest, v1::ServerInfo>(
      context, *raw_request, raw_response, [this](const Caller&, const v1::GetServerInfoRequest&, v1::ServerInfo* out) {
        DescribeServer(out);
        return absl::OkStatus();
      });
}

}  // namespace mcserve::server
