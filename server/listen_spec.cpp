#include "server/listen_spec.h"

#include <stdexcept>

#include "server/server_state.h"

namespace ember::server {

namespace {

// The longest path a sockaddr_un holds on Linux (108 bytes, NUL included).
constexpr size_t kMaxUnixPath = 107;

uint16_t parse_port(std::string_view text, std::string_view entry) {
  if (text.empty() || text.size() > 5) {
    throw std::invalid_argument("listen address '" + std::string(entry) + "': missing or invalid port");
  }
  uint32_t port = 0;
  for (char c : text) {
    if (c < '0' || c > '9') {
      throw std::invalid_argument("listen address '" + std::string(entry) + "': the port must be a number");
    }
    port = port * 10 + static_cast<uint32_t>(c - '0');
  }
  if (port > 65535) {
    throw std::invalid_argument("listen address '" + std::string(entry) + "': port " + std::to_string(port) +
                                " is out of range (0-65535)");
  }
  return static_cast<uint16_t>(port);
}

}  // namespace

std::string ListenSpec::to_string() const {
  if (kind == Kind::Unix) return "unix:" + path;
  if (host.find(':') != std::string::npos) return "[" + host + "]:" + std::to_string(port);
  return host + ":" + std::to_string(port);
}

ListenSpec parse_listen_spec(std::string_view text) {
  ListenSpec spec;
  constexpr std::string_view unix_prefix = "unix:";
  if (text.substr(0, unix_prefix.size()) == unix_prefix) {
    spec.kind = ListenSpec::Kind::Unix;
    spec.path = std::string(text.substr(unix_prefix.size()));
    if (spec.path.empty()) throw std::invalid_argument("listen address '" + std::string(text) + "': empty socket path");
    if (spec.path.size() > kMaxUnixPath) {
      throw std::invalid_argument("listen address '" + std::string(text) + "': the socket path is longer than " +
                                  std::to_string(kMaxUnixPath) + " bytes");
    }
    if (spec.path.find('\0') != std::string::npos) {
      throw std::invalid_argument("listen address: the socket path contains a NUL byte");
    }
    return spec;
  }
  spec.kind = ListenSpec::Kind::Tcp;
  if (!text.empty() && text.front() == '[') {
    const size_t close = text.find(']');
    if (close == std::string_view::npos || close + 1 >= text.size() || text[close + 1] != ':') {
      throw std::invalid_argument("listen address '" + std::string(text) + "': expected [IPv6]:PORT");
    }
    spec.host = std::string(text.substr(1, close - 1));
    spec.port = parse_port(text.substr(close + 2), text);
  } else {
    const size_t colon = text.rfind(':');
    if (colon == std::string_view::npos) {
      throw std::invalid_argument("listen address '" + std::string(text) +
                                  "': expected HOST:PORT or unix:/path/to.sock");
    }
    spec.host = std::string(text.substr(0, colon));
    if (spec.host.find(':') != std::string::npos) {
      throw std::invalid_argument("listen address '" + std::string(text) + "': write IPv6 addresses as [ADDR]:PORT");
    }
    spec.port = parse_port(text.substr(colon + 1), text);
  }
  if (spec.host.empty()) throw std::invalid_argument("listen address '" + std::string(text) + "': missing host");
  return spec;
}

std::vector<ListenSpec> listen_specs(const ServerOptions& options) {
  std::vector<ListenSpec> specs;
  if (options.tcp) {
    ListenSpec main;
    main.host = options.host;
    main.port = options.port;
    specs.push_back(main);
  }
  for (const auto& entry : options.listen) specs.push_back(parse_listen_spec(entry));
  if (specs.empty()) {
    throw std::invalid_argument("nothing to listen on: TCP is disabled and no --listen address was given");
  }
  return specs;
}

}  // namespace ember::server
