#include "clients/cpp/call_canceller.h"

namespace mcserve::client {

void CallCanceller::Cancel() {
  std::lock_guard<std::mutex> lock(mu_);
  cancelled_ = true;
  if (context_ != nullptr) context_->TryCancel();
}

bool CallCanceller::cancelled() const {
  std::lock_guard<std::mutex> lock(mu_);
  return cancelled_;
}

bool CallCanceller::Attach(grpc::ClientContext* context) {
  std::lock_guard<std::mutex> lock(mu_);
  if (cancelled_) return false;
  context_ = context;
  return true;
}

void CallCanceller::Detach() {
  std::lock_guard<std::mutex> lock(mu_);
  context_ = nullptr;
}

}  // namespace mcserve::client
