#include "server/http/connection_registry.h"

namespace mcserve::server {

bool ConnectionRegistry::Add(const std::shared_ptr<Connection>& connection) {
  std::lock_guard<std::mutex> lock(mu_);
  if (sealed_) return false;
  live_.emplace(connection.get(), connection);
  return true;
}

void ConnectionRegistry::Remove(const Connection* connection) {
  std::lock_guard<std::mutex> lock(mu_);
  live_.erase(connection);
}

void ConnectionRegistry::Seal() {
  std::lock_guard<std::mutex> lock(mu_);
  sealed_ = true;
}

std::vector<std::shared_ptr<Connection>> ConnectionRegistry::Live() const {
  std::vector<std::shared_ptr<Connection>> out;
  std::lock_guard<std::mutex> lock(mu_);
  out.reserve(live_.size());
  for (const auto& [key, weak] : live_) {
    if (auto c = weak.lock()) out.push_back(std::move(c));
  }
  return out;
}

size_t ConnectionRegistry::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return live_.size();
}

}  // namespace mcserve::server
