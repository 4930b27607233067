#include "engine/serving/request.h"

namespace mcserve::engine {

OutputEvent FinalEvent(FinishReason reason, absl::Status error) {
  OutputEvent e;
  e.finish = reason;
  e.error = std::move(error);
  return e;
}

}  // namespace mcserve::engine
