// ConnectionRegistry: a server's live HTTP connections, so that stopping it can close every one of
// them, idle, slow or busy. Holds them weakly: a connection lives as long as its pending operations.
// Thread-safe.
#pragma once

#include <cstddef>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

namespace mcserve::server {

class Connection;

class ConnectionRegistry {
 public:
  // Adds `connection`; false (nothing added) once Seal has been called. Any thread.
  bool Add(const std::shared_ptr<Connection>& connection);
  // Removes `connection` (from its destructor). Any thread.
  void Remove(const Connection* connection);
  // From now on Add refuses. Any thread.
  void Seal();
  // The connections alive now. Any thread.
  std::vector<std::shared_ptr<Connection>> Live() const;
  // How many are registered. Any thread.
  size_t size() const;

 private:
  mutable std::mutex mu_;
  std::unordered_map<const Connection*, std::weak_ptr<Connection>> live_;
  bool sealed_ = false;
};

}  // namespace mcserve::server
