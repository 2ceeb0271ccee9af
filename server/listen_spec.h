#pragma once
// Where the server listens: ServerOptions::host/port plus each ServerOptions::listen entry,
// "unix:/path/to.sock" or "HOST:PORT" ("[v6]:PORT" for IPv6). Parsing only; no sockets here.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace ember::server {

struct ServerOptions;

struct ListenSpec {
  enum class Kind { Tcp, Unix };
  Kind kind = Kind::Tcp;
  std::string host;  // Tcp: an address or "localhost" (brackets removed)
  uint16_t port = 0;
  std::string path;  // Unix: the socket file
  // "127.0.0.1:8080", "[::1]:8080" or "unix:/path" (for logs and error messages).
  std::string to_string() const;
};

// Throws std::invalid_argument naming the entry and what is wrong with it.
ListenSpec parse_listen_spec(std::string_view text);
// All endpoints of `options`: host:port first unless `tcp` is false, then the `listen` entries.
// Throws std::invalid_argument for a malformed entry or when nothing is left to listen on.
std::vector<ListenSpec> listen_specs(const ServerOptions& options);

}  // namespace ember::server
