// The gRPC front end in process: StartGrpcServer over a real Engine (the gated_deltanet fixture model)
// on 127.0.0.1, called through the generated mcserve.v1, health and reflection stubs. Every RPC of
// mcserve.v1.Generation, cancellation and deadlines (the engine frees the slot), abort by owner, bad
// arguments and API keys. Waits are bounded for liveness only.
#include "server/grpc/grpc_server.h"

#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <future>
#include <memory>
#include <string>
#include <vector>

#include "engine/model/sentencepiece_loader.h"
#include "engine/serving/recurrent_runner.h"
#include "google/protobuf/descriptor.pb.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "grpc/reflection/v1/reflection.grpc.pb.h"
#include "mcserve/v1/generation.grpc.pb.h"
#include "tests/unit/server/http_server_fixture.h"  // RecordingAccounting, Eventually

namespace mcserve::server {
namespace {

using testing::Eventually;
using testing::RecordingAccounting;

constexpr uint32_t kMaxTokensLimit = 60000;
constexpr int kSlots = 4;

class GrpcServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!engine::internal::SentencePieceModuleDeepBinds()) {
      GTEST_SKIP() << "sanitizer build: the tokenizer module cannot share a process with gRPC's protobuf";
    }
    Serve();
  }
  void TearDown() override { Stop(); }

  void Stop() {
    if (engine_ != nullptr) engine_->Shutdown();
    if (server_ != nullptr) server_->Shutdown(absl::ZeroDuration());
    server_.reset();
    engine_.reset();
  }

  // (Re)starts engine and server; `tweak` adjusts the server's options, `engine_tweak` the engine's
  // (whose max_tokens_limit is kMaxTokensLimit here).
  void Serve(const std::function<void(GrpcServerOptions&)>& tweak = nullptr,
             const std::function<void(engine::EngineOptions&)>& engine_tweak = nullptr) {
    Stop();
    auto model = engine::Model::Load(std::string(MCSERVE_TEST_DATA_DIR) + "/models/gated_deltanet", {.num_threads = 1});
    ASSERT_TRUE(model.ok()) << model.status();
    model_ = std::move(*model);
    auto runner = engine::RecurrentRunner::Create(model_.get(), {.num_slots = kSlots});
    ASSERT_TRUE(runner.ok()) << runner.status();
    engine::EngineOptions engine_options;
    engine_options.max_tokens_limit = kMaxTokensLimit;
    if (engine_tweak) engine_tweak(engine_options);
    auto engine = engine::Engine::Create(std::move(*runner), &model_->tokenizer(), engine_options);
    ASSERT_TRUE(engine.ok()) << engine.status();
    engine_ = std::move(*engine);
    GrpcServerOptions options;
    options.host = "127.0.0.1";
    options.port = 0;
    options.model_path = "fixture/gated_deltanet";
    options.accounting = &accounting_;
    options.version = "test-version";
    if (tweak) tweak(options);
    auto server = StartGrpcServer(engine_.get(), model_.get(), options);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = std::move(*server);
    ASSERT_GT(server_->port(), 0);
    channel_ = grpc::CreateChannel(absl::StrCat("127.0.0.1:", server_->port()), grpc::InsecureChannelCredentials());
    stub_ = v1::Generation::NewStub(channel_);
  }

  // A context carrying `key` (none when empty).
  static std::unique_ptr<grpc::ClientContext> Context(const std::string& key = "") {
    auto context = std::make_unique<grpc::ClientContext>();
    if (!key.empty()) context->AddMetadata("authorization", "Bearer " + key);
    context->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
    return context;
  }

  // A greedy request for `max_tokens` tokens of `text` that ignores EOS.
  static v1::GenerateRequest Request(const std::string& text, uint32_t max_tokens) {
    v1::GenerateRequest request;
    request.set_text(text);
    request.mutable_sampling()->set_temperature(0);
    request.mutable_stop()->set_max_tokens(max_tokens);
    request.mutable_stop()->set_ignore_eos(true);
    return request;
  }

  // Runs Generate to the end: every response and the final status.
  grpc::Status GenerateAll(const v1::GenerateRequest& request, std::vector<v1::GenerateResponse>* responses,
                           const std::string& key = "") {
    auto context = Context(key);
    auto reader = stub_->Generate(context.get(), request);
    v1::GenerateResponse response;
    while (reader->Read(&response)) responses->push_back(response);
    return reader->Finish();
  }

  int slots_used() const { return engine_->Stats().slots_used; }
  int64_t cancelled() const { return engine_->Stats().finished_by(engine::FinishReason::kCancelled); }

  RecordingAccounting accounting_;
  std::unique_ptr<engine::Model> model_;
  std::unique_ptr<engine::Engine> engine_;
  std::unique_ptr<GrpcServer> server_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::Generation::Stub> stub_;
};

// --- Generate ------------------------------------------------------------------------------------

TEST_F(GrpcServerTest, GenerateStreamsTheIdThenTokensThenOneCompletion) {
  const std::string text = "In the beginning";
  std::vector<v1::GenerateResponse> responses;
  grpc::Status status = GenerateAll(Request(text, 8), &responses);
  ASSERT_TRUE(status.ok()) << status.error_message();
  ASSERT_GE(responses.size(), 2u);
  // The first response only names the request (so the client can abort during prefill).
  const std::string id = responses[0].request_id();
  EXPECT_FALSE(id.empty());
  EXPECT_EQ(responses[0].token_ids_size(), 0);
  EXPECT_FALSE(responses[0].has_complete());
  std::vector<int32_t> ids;
  std::string streamed;
  for (size_t i = 0; i < responses.size(); ++i) {
    EXPECT_EQ(responses[i].request_id(), id);
    EXPECT_EQ(responses[i].has_complete(), i + 1 == responses.size()) << i;
    ids.insert(ids.end(), responses[i].token_ids().begin(), responses[i].token_ids().end());
    streamed += responses[i].text();
    EXPECT_EQ(responses[i].generated_tokens(), ids.size()) << i;
  }
  EXPECT_EQ(ids.size(), 8u);
  const v1::Completion& done = responses.back().complete();
  EXPECT_EQ(done.finish_reason(), v1::FINISH_REASON_LENGTH);
  EXPECT_EQ(done.generated_tokens(), 8u);
  auto prompt = model_->tokenizer().Encode(text, /*add_bos=*/true);
  ASSERT_TRUE(prompt.ok());
  EXPECT_EQ(done.prompt_tokens(), prompt->size());
  EXPECT_GT(done.e2e_seconds(), 0);
  EXPECT_GE(done.e2e_seconds(), done.time_to_first_token_seconds());
  EXPECT_TRUE(done.has_checkpoints());  // Engine::Stats, read off the engine loop thread
  // The same request again (greedy): the same tokens and text.
  std::vector<v1::GenerateResponse> again;
  ASSERT_TRUE(GenerateAll(Request(text, 8), &again).ok());
  std::vector<int32_t> ids_again;
  std::string streamed_again;
  for (const auto& r : again) {
    ids_again.insert(ids_again.end(), r.token_ids().begin(), r.token_ids().end());
    streamed_again += r.text();
  }
  EXPECT_EQ(ids_again, ids);
  EXPECT_EQ(streamed_again, streamed);
  ASSERT_TRUE(Eventually([&] { return server_->active_streams() == 0 && slots_used() == 0; }));
  const auto finished = accounting_.finished();
  ASSERT_EQ(finished.size(), 2u);
  EXPECT_EQ(finished[0].reason, engine::FinishReason::kLength);
  EXPECT_EQ(finished[0].generated_tokens, 8);
  EXPECT_EQ(finished[0].prompt_tokens, static_cast<int64_t>(prompt->size()));
}

TEST_F(GrpcServerTest, GenerateFromTokenIdsWithLogprobsAndAClientId) {
  v1::GenerateRequest request = Request("", 5);
  request.mutable_token_ids()->add_ids(model_->tokenizer().bos_id());
  request.mutable_token_ids()->add_ids(5);
  request.mutable_token_ids()->add_ids(7);
  request.set_logprobs(3);
  request.set_request_id("my-job");
  std::vector<v1::GenerateResponse> responses;
  grpc::Status status = GenerateAll(request, &responses);
  ASSERT_TRUE(status.ok()) << status.error_message();
  int tokens = 0;
  for (const auto& r : responses) {
    EXPECT_EQ(r.request_id(), "my-job");
    ASSERT_EQ(r.logprobs_size(), r.token_ids_size());
    for (int i = 0; i < r.logprobs_size(); ++i) {
      EXPECT_EQ(r.logprobs(i).token_id(), r.token_ids(i));
      EXPECT_EQ(r.logprobs(i).top_size(), 3);
      EXPECT_LE(r.logprobs(i).logprob(), 0);
    }
    tokens += r.token_ids_size();
  }
  EXPECT_EQ(tokens, 5);
  EXPECT_EQ(responses.back().complete().prompt_tokens(), 3u);
}

TEST_F(GrpcServerTest, GenerateRejectsInvalidArgumentsNamingThem) {
  struct Case {
    std::string name;
    std::function<void(v1::GenerateRequest&)> edit;
    std::string expected;  // part of the message
  };
  const std::vector<Case> cases = {
      {"no prompt", [](v1::GenerateRequest& r) { r.clear_prompt(); }, "prompt"},
      {"empty text", [](v1::GenerateRequest& r) { r.set_text(""); }, "text"},
      {"empty ids", [](v1::GenerateRequest& r) { r.mutable_token_ids(); }, "token_ids"},
      // The engine's request rules (CheckRequest), the same for both front ends.
      {"max_tokens", [](v1::GenerateRequest& r) { r.mutable_stop()->set_max_tokens(kMaxTokensLimit + 1); },
       absl::StrCat("max_tokens: ", kMaxTokensLimit + 1, " is outside [1, ", kMaxTokensLimit, "]")},
      {"max_tokens beyond int32", [](v1::GenerateRequest& r) { r.mutable_stop()->set_max_tokens(4294967295u); },
       "max_tokens: 2147483647 is outside [1, "},
      {"min_tokens", [](v1::GenerateRequest& r) { r.mutable_stop()->set_min_tokens(kMaxTokensLimit + 1); },
       "min_tokens: "},
      {"logprobs", [](v1::GenerateRequest& r) { r.set_logprobs(21); }, "logprobs: 21 is outside [0, 20]"},
      {"stop id", [](v1::GenerateRequest& r) { r.mutable_stop()->add_stop_token_ids(-1); },
       "stop_token_ids[0]: -1 is outside the vocabulary"},
      {"logit_bias key", [](v1::GenerateRequest& r) { (*r.mutable_sampling()->mutable_logit_bias())[1 << 30] = 1; },
       "logit_bias: token id 1073741824 is outside the vocabulary"},
      {"id out of vocabulary", [](v1::GenerateRequest& r) { r.mutable_token_ids()->add_ids(1 << 30); },
       "has id 1073741824, outside the vocabulary"},
  };
  for (const Case& c : cases) {
    v1::GenerateRequest request = Request("hello", 4);
    c.edit(request);
    std::vector<v1::GenerateResponse> responses;
    grpc::Status status = GenerateAll(request, &responses);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << c.name << ": " << status.error_message();
    EXPECT_NE(status.error_message().find(c.expected), std::string::npos) << c.name << ": " << status.error_message();
    EXPECT_TRUE(responses.empty()) << c.name;
  }
  // Nothing was left running or reserved: the same client id can be used at once.
  v1::GenerateRequest request = Request("hello", 2);
  request.set_request_id("reused");
  std::vector<v1::GenerateResponse> responses;
  EXPECT_TRUE(GenerateAll(request, &responses).ok());
  EXPECT_TRUE(Eventually([&] { return server_->active_streams() == 0 && slots_used() == 0; }));
}

TEST_F(GrpcServerTest, ClientCancelMidStreamCancelsTheRequestAndFreesItsSlot) {
  auto context = Context();
  auto reader = stub_->Generate(context.get(), Request("And God said", kMaxTokensLimit));
  v1::GenerateResponse response;
  int tokens = 0;
  while (tokens < 3 && reader->Read(&response)) tokens += response.token_ids_size();
  ASSERT_GE(tokens, 3);
  EXPECT_TRUE(Eventually([&] { return slots_used() == 1; }));
  context->TryCancel();
  while (reader->Read(&response)) {
  }
  EXPECT_EQ(reader->Finish().error_code(), grpc::StatusCode::CANCELLED);
  ASSERT_TRUE(Eventually([&] { return slots_used() == 0 && cancelled() == 1; }))
      << "slots used " << slots_used() << ", cancelled " << cancelled();
  ASSERT_TRUE(Eventually([&] { return server_->active_streams() == 0; }));
  ASSERT_TRUE(Eventually([&] { return accounting_.finished().size() == 1; }));
  EXPECT_EQ(accounting_.finished()[0].reason, engine::FinishReason::kCancelled);
  EXPECT_LT(engine_->Stats().tokens_generated, kMaxTokensLimit);
}

TEST_F(GrpcServerTest, ShortDeadlineIsDeadlineExceededAndCancelsTheRequest) {
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(300));
  auto reader = stub_->Generate(&context, Request("And God said", kMaxTokensLimit));
  v1::GenerateResponse response;
  int responses = 0;
  while (reader->Read(&response)) ++responses;
  EXPECT_GE(responses, 1);
  EXPECT_EQ(reader->Finish().error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
  ASSERT_TRUE(Eventually([&] { return slots_used() == 0 && cancelled() == 1; }))
      << "slots used " << slots_used() << ", cancelled " << cancelled();
  ASSERT_TRUE(Eventually([&] { return server_->active_streams() == 0; }));
  EXPECT_LT(engine_->Stats().tokens_generated, kMaxTokensLimit);
}

TEST_F(GrpcServerTest, MalformedRequestBytesAreInvalidArgument) {
  grpc::GenericStub generic(channel_);
  // Field 1 (text) announces 127 bytes and has 2.
  const std::string bytes =
      "\x0a\x7f"
      "ab";
  for (const std::string method : {"/mcserve.v1.Generation/Tokenize", "/mcserve.v1.Generation/GetModelInfo"}) {
    grpc::Slice slice(bytes);
    grpc::ByteBuffer request(&slice, 1);
    grpc::ByteBuffer response;
    auto context = Context();
    std::promise<grpc::Status> done;
    generic.UnaryCall(context.get(), method, grpc::StubOptions(), &request, &response,
                      [&](grpc::Status status) { done.set_value(std::move(status)); });
    const grpc::Status status = done.get_future().get();
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << method << ": " << status.error_message();
  }
}

// --- Abort -----------------------------------------------------------------------------------------

TEST_F(GrpcServerTest, AbortReachesOnlyTheOwnersRequest) {
  Serve([](GrpcServerOptions& o) { o.api_keys = *ApiKeys::Parse("alice key-a\nbob key-b\n", "keys"); });
  for (const std::string client_id : {"job-1", ""}) {
    auto context = Context("key-a");
    v1::GenerateRequest request = Request("Let there be light", kMaxTokensLimit);
    request.set_request_id(client_id);
    auto reader = stub_->Generate(context.get(), request);
    v1::GenerateResponse response;
    ASSERT_TRUE(reader->Read(&response));
    const std::string id = response.request_id();
    if (!client_id.empty()) {
      EXPECT_EQ(id, client_id);
    }

    v1::AbortRequest abort;
    abort.set_request_id(id);
    v1::AbortResponse aborted;
    // Bob cannot abort (nor learn of) Alice's request, whether he names her id or her server id.
    grpc::Status bob = stub_->Abort(Context("key-b").get(), abort, &aborted);
    EXPECT_EQ(bob.error_code(), grpc::StatusCode::NOT_FOUND) << client_id;
    // Alice can: her stream ends with a CANCELLED completion.
    grpc::Status alice = stub_->Abort(Context("key-a").get(), abort, &aborted);
    EXPECT_TRUE(alice.ok()) << alice.error_message();
    bool completed = false;
    while (reader->Read(&response)) {
      if (response.has_complete()) {
        completed = true;
        EXPECT_EQ(response.complete().finish_reason(), v1::FINISH_REASON_CANCELLED);
      }
    }
    EXPECT_TRUE(reader->Finish().ok());
    EXPECT_TRUE(completed);
    EXPECT_LT(response.generated_tokens(), kMaxTokensLimit);  // it did not run to its end
    ASSERT_TRUE(Eventually([&] { return slots_used() == 0; }));
    // Once it ended the id is unknown, for her too.
    ASSERT_TRUE(Eventually([&] {
      return stub_->Abort(Context("key-a").get(), abort, &aborted).error_code() == grpc::StatusCode::NOT_FOUND;
    }));
  }
  EXPECT_EQ(cancelled(), 2);
}

TEST_F(GrpcServerTest, AbortRejectsAnEmptyIdAndAnswersNotFoundForAnUnknownOne) {
  v1::AbortRequest abort;
  v1::AbortResponse aborted;
  EXPECT_EQ(stub_->Abort(Context().get(), abort, &aborted).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  abort.set_request_id("no-such-request");
  grpc::Status status = stub_->Abort(Context().get(), abort, &aborted);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_NE(status.error_message().find("no-such-request"), std::string::npos) << status.error_message();
}

// --- Tokenize, GetModelInfo, GetServerInfo ---------------------------------------------------------

TEST_F(GrpcServerTest, TokenizeMatchesTheEnginesTokenizer) {
  for (bool add_bos : {false, true}) {
    v1::TokenizeRequest request;
    request.set_text("In the beginning God created the heaven and the earth.");
    request.set_add_bos(add_bos);
    v1::TokenizeResponse response;
    grpc::Status status = stub_->Tokenize(Context().get(), request, &response);
    ASSERT_TRUE(status.ok()) << status.error_message();
    auto expected = model_->tokenizer().Encode(request.text(), add_bos);
    ASSERT_TRUE(expected.ok());
    EXPECT_EQ(std::vector<int32_t>(response.token_ids().begin(), response.token_ids().end()), *expected);
  }
  // Longer than --max-prompt-tokens: INVALID_ARGUMENT naming the limit.
  Serve(nullptr, [](engine::EngineOptions& o) { o.max_prompt_tokens = 4; });
  v1::TokenizeRequest request;
  request.set_text("In the beginning God created the heaven and the earth.");
  v1::TokenizeResponse response;
  grpc::Status status = stub_->Tokenize(Context().get(), request, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
}

TEST_F(GrpcServerTest, GetModelInfoDescribesTheModelAndLimits) {
  v1::ModelInfo info;
  grpc::Status status = stub_->GetModelInfo(Context().get(), v1::GetModelInfoRequest(), &info);
  ASSERT_TRUE(status.ok()) << status.error_message();
  const engine::ModelConfig& config = model_->config();
  EXPECT_EQ(info.model_path(), "fixture/gated_deltanet");
  EXPECT_EQ(info.model_type(), config.model_type);
  EXPECT_EQ(info.family(), config.model_type);
  EXPECT_EQ(info.num_layers(), config.num_hidden_layers);
  EXPECT_EQ(info.hidden_size(), config.hidden_size);
  EXPECT_EQ(info.vocab_size(), config.vocab_size);
  EXPECT_EQ(info.num_slots(), kSlots);
  EXPECT_EQ(info.max_running_requests(), engine_->EffectiveConcurrency());
  EXPECT_EQ(info.max_tokens_limit(), kMaxTokensLimit);
  EXPECT_EQ(info.bos_token_id(), config.bos_token_id);
  EXPECT_EQ(info.eos_token_id(), config.eos_token_id);
}

TEST_F(GrpcServerTest, GetServerInfoCountsWorkAndReportsStopAdmitting) {
  std::vector<v1::GenerateResponse> responses;
  ASSERT_TRUE(GenerateAll(Request("hello", 6), &responses).ok());
  v1::ServerInfo info;
  grpc::Status status = stub_->GetServerInfo(Context().get(), v1::GetServerInfoRequest(), &info);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(info.version(), "test-version");
  EXPECT_GE(info.uptime_seconds(), 0);
  EXPECT_EQ(info.slots_total(), kSlots);
  EXPECT_GE(info.tokens_generated(), 6);
  EXPECT_EQ(info.finished_length(), 1);
  EXPECT_TRUE(info.serving());

  server_->StopAdmitting();
  ASSERT_TRUE(stub_->GetServerInfo(Context().get(), v1::GetServerInfoRequest(), &info).ok());
  EXPECT_FALSE(info.serving());
  responses.clear();
  EXPECT_EQ(GenerateAll(Request("hello", 2), &responses).error_code(), grpc::StatusCode::UNAVAILABLE);
}

// --- Health and reflection ---------------------------------------------------------------------------

TEST_F(GrpcServerTest, HealthServesWithoutAKeyAndGoesNotServingOnStopAdmitting) {
  Serve([](GrpcServerOptions& o) { o.api_keys = ApiKeys::Single("secret"); });
  auto health = grpc::health::v1::Health::NewStub(channel_);
  grpc::health::v1::HealthCheckResponse response;
  grpc::Status status = health->Check(Context().get(), grpc::health::v1::HealthCheckRequest(), &response);  // no key
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(response.status(), grpc::health::v1::HealthCheckResponse::SERVING);
  server_->StopAdmitting();
  ASSERT_TRUE(health->Check(Context().get(), grpc::health::v1::HealthCheckRequest(), &response).ok());
  EXPECT_EQ(response.status(), grpc::health::v1::HealthCheckResponse::NOT_SERVING);
}

TEST_F(GrpcServerTest, ReflectionListsTheServicesAndDescribesGeneration) {
  auto reflection = grpc::reflection::v1::ServerReflection::NewStub(channel_);
  auto context = Context();
  auto stream = reflection->ServerReflectionInfo(context.get());
  grpc::reflection::v1::ServerReflectionRequest request;
  request.set_list_services("");
  ASSERT_TRUE(stream->Write(request));
  grpc::reflection::v1::ServerReflectionResponse response;
  ASSERT_TRUE(stream->Read(&response));
  std::vector<std::string> services;
  for (const auto& s : response.list_services_response().service()) services.push_back(s.name());
  EXPECT_NE(std::find(services.begin(), services.end(), "mcserve.v1.Generation"), services.end());
  EXPECT_NE(std::find(services.begin(), services.end(), "grpc.health.v1.Health"), services.end());

  request.set_file_containing_symbol("mcserve.v1.Generation");
  ASSERT_TRUE(stream->Write(request));
  ASSERT_TRUE(stream->Read(&response));
  ASSERT_GE(response.file_descriptor_response().file_descriptor_proto_size(), 1);
  google::protobuf::FileDescriptorProto file;
  ASSERT_TRUE(file.ParseFromString(response.file_descriptor_response().file_descriptor_proto(0)));
  EXPECT_EQ(file.package(), "mcserve.v1");
  ASSERT_GE(file.service_size(), 1);
  EXPECT_EQ(file.service(0).name(), "Generation");
  EXPECT_EQ(file.service(0).method_size(), 5);

  request.set_file_containing_symbol("no.such.Symbol");
  ASSERT_TRUE(stream->Write(request));
  ASSERT_TRUE(stream->Read(&response));
  EXPECT_EQ(response.error_response().error_code(), static_cast<int>(grpc::StatusCode::NOT_FOUND));
  stream->WritesDone();
  EXPECT_TRUE(stream->Finish().ok());
}

// --- API keys ------------------------------------------------------------------------------------------

TEST_F(GrpcServerTest, EveryRpcButHealthNeedsAValidKey) {
  Serve([](GrpcServerOptions& o) { o.api_keys = ApiKeys::Single("secret"); });
  auto health = grpc::health::v1::Health::NewStub(channel_);
  auto reflection = grpc::reflection::v1::ServerReflection::NewStub(channel_);
  // Each RPC once with `key`; its status code.
  const auto calls = [&](const std::string& key) {
    std::vector<grpc::StatusCode> codes;
    std::vector<v1::GenerateResponse> responses;
    codes.push_back(GenerateAll(Request("hello", 2), &responses, key).error_code());
    v1::AbortRequest abort;
    abort.set_request_id("no-such-request");
    v1::AbortResponse aborted;
    codes.push_back(stub_->Abort(Context(key).get(), abort, &aborted).error_code());
    v1::TokenizeRequest tokenize;
    tokenize.set_text("hello");
    v1::TokenizeResponse tokens;
    codes.push_back(stub_->Tokenize(Context(key).get(), tokenize, &tokens).error_code());
    v1::ModelInfo model;
    codes.push_back(stub_->GetModelInfo(Context(key).get(), v1::GetModelInfoRequest(), &model).error_code());
    v1::ServerInfo server;
    codes.push_back(stub_->GetServerInfo(Context(key).get(), v1::GetServerInfoRequest(), &server).error_code());
    auto context = Context(key);
    auto stream = reflection->ServerReflectionInfo(context.get());
    grpc::reflection::v1::ServerReflectionRequest list;
    list.set_list_services("");
    stream->Write(list);
    grpc::reflection::v1::ServerReflectionResponse listed;
    while (stream->Read(&listed)) stream->WritesDone();
    codes.push_back(stream->Finish().error_code());
    return codes;
  };
  const std::vector<grpc::StatusCode> unauthenticated(6, grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(calls(""), unauthenticated);
  EXPECT_EQ(calls("wrong"), unauthenticated);
  EXPECT_EQ(accounting_.unauthenticated(), 12);
  EXPECT_EQ(calls("secret"),
            (std::vector<grpc::StatusCode>{grpc::StatusCode::OK, grpc::StatusCode::NOT_FOUND, grpc::StatusCode::OK,
                                           grpc::StatusCode::OK, grpc::StatusCode::OK, grpc::StatusCode::OK}));
  grpc::health::v1::HealthCheckResponse response;
  EXPECT_TRUE(health->Check(Context().get(), grpc::health::v1::HealthCheckRequest(), &response).ok());
  EXPECT_EQ(accounting_.unauthenticated(), 12);
}

}  // namespace
}  // namespace mcserve::server
