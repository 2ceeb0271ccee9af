#include "server/access_control.h"

#include <arpa/inet.h>

#include <algorithm>
#include <cctype>
#include <cstring>

namespace ember::server {
namespace {

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

bool all_digits(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// "name", "name:port", "[v6]", "[v6]:port" -> the name (brackets removed), or nullopt if malformed.
std::optional<std::string> host_name_of(std::string_view host) {
  host = trim(host);
  if (host.empty()) return std::nullopt;
  if (host.front() == '[') {
    const size_t close = host.find(']');
    if (close == std::string_view::npos) return std::nullopt;
    const std::string_view rest = host.substr(close + 1);
    if (!rest.empty() && !(rest.front() == ':' && all_digits(rest.substr(1)) && rest.size() <= 6)) {
      return std::nullopt;
    }
    return lower(host.substr(1, close - 1));
  }
  const size_t colon = host.find(':');
  if (colon != std::string_view::npos) {
    const std::string_view port = host.substr(colon + 1);
    if (!all_digits(port) || port.size() > 5) return std::nullopt;
    host = host.substr(0, colon);
  }
  if (host.empty()) return std::nullopt;
  std::string name = lower(host);
  if (name.size() > 1 && name.back() == '.') name.pop_back();  // "localhost." is the same name
  return name;
}

bool is_loopback_address(const std::string& name) {
  unsigned char buf[16];
  if (inet_pton(AF_INET, name.c_str(), buf) == 1) return buf[0] == 127;
  if (inet_pton(AF_INET6, name.c_str(), buf) == 1) {
    static const unsigned char v6_loopback[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
    if (std::memcmp(buf, v6_loopback, 16) == 0) return true;
    // ::ffff:127.x.y.z, an IPv4 loopback address written as IPv6
    static const unsigned char mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    return std::memcmp(buf, mapped, 12) == 0 && buf[12] == 127;
  }
  return false;
}

bool token_char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || std::strchr("!#$%&'*+-.^_`|~", c) != nullptr;
}

}  // namespace

bool is_loopback_listen_host(std::string_view host) {
  if (is_loopback_address(lower(trim(host)))) return true;  // "::1" unbracketed is fine here
  const auto name = host_name_of(host);
  if (!name) return false;
  return *name == "localhost" || is_loopback_address(*name);
}

bool host_header_allowed(std::optional<std::string_view> host, const std::vector<std::string>& allowed_hosts) {
  if (!host) return true;
  const auto name = host_name_of(*host);
  if (!name) return false;
  if (*name == "localhost" || is_loopback_address(*name)) return true;
  for (const auto& allowed : allowed_hosts) {
    if (allowed == "*") return true;
    const auto allowed_name = host_name_of(allowed);
    if (allowed_name && *allowed_name == *name) return true;
  }
  return false;
}

std::vector<std::string_view> presented_api_keys(std::optional<std::string_view> authorization,
                                                 std::optional<std::string_view> x_api_key) {
  std::vector<std::string_view> keys;
  if (authorization) {
    std::string_view a = trim(*authorization);
    constexpr std::string_view scheme = "bearer";
    if (a.size() > scheme.size() && lower(a.substr(0, scheme.size())) == scheme &&
        (a[scheme.size()] == ' ' || a[scheme.size()] == '\t')) {
      const std::string_view key = trim(a.substr(scheme.size()));
      if (!key.empty()) keys.push_back(key);
    }
  }
  if (x_api_key) {
    const std::string_view key = trim(*x_api_key);
    if (!key.empty()) keys.push_back(key);
  }
  return keys;
}

bool constant_time_equal(std::string_view presented, std::string_view expected) {
  if (expected.empty()) return false;
  // The loop runs over the presented key (whose length the caller knows anyway) and touches the
  // expected one cyclically, accumulating differences without branching on them.
  unsigned diff = presented.size() == expected.size() ? 0u : 1u;
  for (size_t i = 0; i < presented.size(); ++i) {
    diff |= static_cast<unsigned char>(presented[i]) ^ static_cast<unsigned char>(expected[i % expected.size()]);
  }
  return diff == 0 && !presented.empty();
}

bool api_key_accepted(const std::vector<std::string_view>& presented, const std::vector<std::string>& keys) {
  bool ok = false;
  // No early exit: every configured key is compared, so timing does not reveal which one matched.
  for (const auto& p : presented) {
    for (const auto& k : keys) ok |= constant_time_equal(p, k);
  }
  return ok;
}

bool origin_allowed(std::string_view origin, const std::vector<std::string>& cors_origins) {
  origin = trim(origin);
  if (origin.empty()) return false;
  const std::string o = lower(origin);
  for (const auto& allowed : cors_origins) {
    if (allowed == "*") return true;
    std::string a = lower(trim(allowed));
    while (!a.empty() && a.back() == '/') a.pop_back();
    if (!a.empty() && a == o) return true;
  }
  return false;
}

bool same_origin(std::string_view origin, std::optional<std::string_view> host) {
  if (!host) return false;
  origin = trim(origin);
  const size_t scheme_end = origin.find("://");
  if (scheme_end == std::string_view::npos) return false;  // "null" (file://, sandboxed frames)
  const std::string_view authority = origin.substr(scheme_end + 3);
  const std::string_view h = trim(*host);
  return !authority.empty() && lower(authority) == lower(h);
}

bool request_origin_allowed(std::optional<std::string_view> origin, std::optional<std::string_view> host,
                            const std::vector<std::string>& cors_origins) {
  if (!origin) return true;
  return origin_allowed(*origin, cors_origins) || same_origin(*origin, host);
}

std::string preflight_allow_headers(std::optional<std::string_view> requested) {
  if (!requested) return kCorsDefaultAllowHeaders;
  const std::string_view r = trim(*requested);
  if (r.empty() || r.size() > 1024) return kCorsDefaultAllowHeaders;
  for (char c : r) {
    if (!token_char(c) && c != ',' && c != ' ' && c != '\t') return kCorsDefaultAllowHeaders;
  }
  return std::string(r);
}

}  // namespace ember::server
