#include "server/grpc/generate_stream.h"

#include <algorithm>
#include <optional>
#include <utility>

#include "server/grpc/proto_convert.h"
#include "server/grpc/request_decoder.h"

namespace mcserve::server {

using engine::FinishReason;
using engine::OutputEvent;

namespace {

grpc::Status Cancelled() { return grpc::Status(grpc::StatusCode::CANCELLED, "the call was cancelled"); }

}  // namespace

GenerateStream::GenerateStream(grpc::CallbackServerContext* context, const GenerateStreamEnv& env,
                               GenerateStreamRequest request)
    : context_(context), env_(env), request_(std::move(request)) {
  env_.active_streams->fetch_add(1);
  {
    std::lock_guard<std::mutex> lock(mu_);
    claimed_ = true;
  }
  response_.set_request_id(request_.request_id);
  Write(/*last=*/false);
  request_.handle->OnOutput([this] { OnOutput(); });
}

void GenerateStream::OnOutput() {
  bool flush = false;
  bool cancel = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (finished_) return;
    if (!claimed_) {
      claimed_ = flush = true;
    } else {
      output_pending_ = true;
      if (write_in_flight_ && !cancel_requested_ && WriteStuckLocked(std::chrono::steady_clock::now())) {
        cancel_requested_ = cancel = true;
      }
    }
  }
  if (cancel) context_->TryCancel();  // the write fails, then OnWriteDone finishes the call
  if (flush) Flush(/*on_loop=*/true);
}

void GenerateStream::OnWriteDone(bool ok) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    write_in_flight_ = false;
    if (!ok) finished_ = true;
  }
  if (!ok) return Finish(Cancelled());
  Flush(/*on_loop=*/false);
}

void GenerateStream::OnCancel() {
  request_.handle->Abort();
  bool finish = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    cancelled_ = true;
    if (!claimed_ && !finished_) claimed_ = finished_ = finish = true;
  }
  if (finish) Finish(Cancelled());
}

void GenerateStream::OnDone() {
  request_.handle->OnOutput(nullptr);  // no lock held: the listener takes mu_
  // Output the call ended before delivering still counts (a cancelled call, a stuck write).
  while (std::optional<OutputEvent> event = request_.handle->TryNext()) {
    if (event->token_id >= 0) ++generated_;
    if (event->is_final()) finish_reason_ = event->finish;
  }
  env_.registry->Release(request_.caller.owner, request_.request_id);
  if (env_.accounting != nullptr) {
    env_.accounting->RequestFinished(request_.caller.key_name, finish_reason_, request_.prompt_tokens, generated_);
  }
  env_.active_streams->fetch_sub(1);
  delete this;
}

void GenerateStream::Flush(bool on_loop) {
  for (;;) {
    bool cancelled = false;
    {
      std::lock_guard<std::mutex> lock(mu_);
      output_pending_ = false;
      cancelled = cancelled_;
      if (cancelled) finished_ = true;
    }
    if (cancelled) return Finish(Cancelled());
    switch (Collect()) {
      case Batch::kEvents: return Write(/*last=*/false);
      case Batch::kFinal:
        if (!on_loop) return WriteFinal();
        // Due at once: the callback runs on gRPC's executor, not here.
        return hop_.Set(gpr_now(GPR_CLOCK_MONOTONIC), [this](bool) { WriteFinal(); });
      case Batch::kFailed: {
        {
          std::lock_guard<std::mutex> lock(mu_);
          finished_ = true;
        }
        return Finish(ToGrpcStatus(failure_));
      }
      case Batch::kEmpty: break;
    }
    std::lock_guard<std::mutex> lock(mu_);
    if (!output_pending_ && !cancelled_) {
      claimed_ = false;
      return;
    }
  }
}

GenerateStream::Batch GenerateStream::Collect() {
  response_.Clear();
  response_.set_request_id(request_.request_id);
  int events = 0;
  while (events < kMaxEventsPerResponse) {
    std::optional<OutputEvent> event = request_.handle->TryNext();
    if (!event.has_value()) break;
    ++events;
    if (event->is_final()) {
      finish_reason_ = event->finish;
      // kError, and kCancelled with a cause (the write timeout): the call ends with that status.
      if (event->finish == FinishReason::kError || !event->error.ok()) {
        failure_ = event->error.ok() ? absl::InternalError("generation failed") : event->error;
        return Batch::kFailed;
      }
      Append(*event);
      final_event_ = *std::move(event);
      return Batch::kFinal;
    }
    Append(*event);
  }
  return events > 0 ? Batch::kEvents : Batch::kEmpty;
}

void GenerateStream::WriteFinal() {
  Complete(*final_event_);
  Write(/*last=*/true);
}

void GenerateStream::Append(const OutputEvent& event) {
  if (event.cached_prompt_tokens >= 0) cached_prompt_tokens_ = event.cached_prompt_tokens;
  if (event.token_id >= 0) {
    if (generated_ == 0) first_token_ = absl::Now();
    ++generated_;
    response_.add_token_ids(event.token_id);
    if (request_.want_logprobs) {
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

void GenerateStream::Complete(const OutputEvent& event) {
  v1::Completion* done = response_.mutable_complete();
  done->set_finish_reason(ToProto(event.finish));
  done->set_stop_string(event.stop);
  if (event.stop_token.has_value()) done->set_stop_token_id(*event.stop_token);
  done->set_prompt_tokens(static_cast<uint32_t>(request_.prompt_tokens));
  done->set_cached_prompt_tokens(static_cast<uint32_t>(std::max<int64_t>(cached_prompt_tokens_, 0)));
  done->set_generated_tokens(static_cast<uint32_t>(generated_));
  if (generated_ > 0) done->set_time_to_first_token_seconds(absl::ToDoubleSeconds(first_token_ - request_.start));
  done->set_e2e_seconds(absl::ToDoubleSeconds(absl::Now() - request_.start));
  FillCheckpointStats(env_.engine->Stats().runner, done->mutable_checkpoints());
}

void GenerateStream::Write(bool last) {
  EncodeResponse(response_, &buffer_);
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (last) {
      finished_ = true;
    } else {
      write_in_flight_ = true;
      write_started_ = std::chrono::steady_clock::now();
    }
  }
  if (last) {
    StartWriteAndFinish(&buffer_, grpc::WriteOptions(), grpc::Status::OK);
  } else {
    StartWrite(&buffer_);
  }
}

bool GenerateStream::WriteStuckLocked(std::chrono::steady_clock::time_point now) const {
  const absl::Duration timeout = env_.write_timeout;
  if (timeout <= absl::ZeroDuration() || timeout == absl::InfiniteDuration()) return false;
  return now - write_started_ >= absl::ToChronoNanoseconds(timeout);
}

}  // namespace mcserve::server
