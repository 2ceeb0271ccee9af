#pragma once
// Who may call the server: API keys, the Host check against DNS rebinding and CORS origins. Pure
// functions over header values so every decision is unit-tested without sockets.
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ember::server {

// True when `host` (a listen address: "127.0.0.1", "::1", "localhost", ...) is a loopback address,
// i.e. only this machine can connect and the Host check applies.
bool is_loopback_listen_host(std::string_view host);

// The DNS-rebinding check for servers bound to loopback: the Host header (with or without a port)
// must name localhost, a loopback address (127.0.0.0/8, [::1]) or one of `allowed_hosts` (compared
// without port, case-insensitively; "*" allows any). A missing Host (HTTP/1.0 tools) is allowed:
// browsers, the only rebinding vector, always send one.
bool host_header_allowed(std::optional<std::string_view> host, const std::vector<std::string>& allowed_hosts);

// The key a request presents: `Authorization: Bearer KEY` (scheme case-insensitive) or
// `X-Api-Key: KEY`. Empty when neither header carries one.
std::vector<std::string_view> presented_api_keys(std::optional<std::string_view> authorization,
                                                 std::optional<std::string_view> x_api_key);
// Whether any presented key equals any configured (non-empty) key. Each comparison takes time that
// depends only on the presented key's length, never on where a guess first differs.
bool api_key_accepted(const std::vector<std::string_view>& presented, const std::vector<std::string>& keys);
bool constant_time_equal(std::string_view presented, std::string_view expected);

// CORS: whether a browser at `origin` may call us. `cors_origins` empty: CORS is off. "*" allows any.
// Origins compare case-insensitively, ignoring a trailing '/' in the configured entry.
bool origin_allowed(std::string_view origin, const std::vector<std::string>& cors_origins);
// Whether a browser request from `origin` comes from a page this server itself served: the
// origin's host[:port] equals the Host header (case-insensitively). Such requests need no CORS.
bool same_origin(std::string_view origin, std::optional<std::string_view> host);
// Whether a request carrying `origin` (absent: not from a browser page) may be served at all. A
// browser sends "simple" cross-origin requests (a text/plain POST) without a preflight and
// merely hides the answer from the page, so refusing only the preflight would still let any web
// page start generations: a foreign origin is refused before any work is done.
bool request_origin_allowed(std::optional<std::string_view> origin, std::optional<std::string_view> host,
                            const std::vector<std::string>& cors_origins);
// The Access-Control-Allow-Headers value for a preflight: the requested header names when they are
// a well-formed, reasonably short list, otherwise the headers our API uses.
std::string preflight_allow_headers(std::optional<std::string_view> requested);

inline constexpr const char* kCorsAllowMethods = "GET, POST, OPTIONS";
inline constexpr const char* kCorsDefaultAllowHeaders = "Authorization, Content-Type, X-Api-Key";
inline constexpr const char* kCorsMaxAgeSeconds = "600";

}  // namespace ember::server
