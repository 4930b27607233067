// CallCanceller: cancels a GenerationClient::Generate in flight, from another thread.
#pragma once

#include <mutex>

#include <grpcpp/client_context.h>

namespace mcserve::client {

// Pass one to Generate and call Cancel() from any thread (or a signal-watching thread): the stream
// is cancelled (the server aborts the request) and Generate returns CANCELLED. A Cancel() before
// Generate starts makes it return CANCELLED at once. One Generate at a time per canceller.
class CallCanceller {
 public:
  // Cancels the call in flight, if any, and every later one using this canceller. Any thread.
  void Cancel();
  // Whether Cancel() was called. Any thread.
  bool cancelled() const;

  // For GenerationClient: registers the context of the call starting now; false if already
  // cancelled. Detach() before the context is destroyed.
  bool Attach(grpc::ClientContext* context);
  void Detach();

 private:
  mutable std::mutex mu_;
  grpc::ClientContext* context_ = nullptr;  // the call in flight, guarded by mu_
  bool cancelled_ = false;
};

}  // namespace mcserve::client
