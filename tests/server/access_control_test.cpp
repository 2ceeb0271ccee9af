// Who may call the server: Host check, API keys, CORS decisions (pure functions, no sockets).
#include <doctest/doctest.h>

#include "server/access_control.h"

using namespace ember::server;

TEST_CASE("access: loopback listen addresses") {
  for (const char* h : {"127.0.0.1", "127.1.2.3", "::1", "localhost", "LOCALHOST", "[::1]", "::ffff:127.0.0.1"}) {
    CAPTURE(h);
    CHECK(is_loopback_listen_host(h));
  }
  for (const char* h : {"0.0.0.0", "::", "192.168.1.2", "example.com", "128.0.0.1", ""}) {
    CAPTURE(h);
    CHECK(!is_loopback_listen_host(h));
  }
}

TEST_CASE("access: Host header check against DNS rebinding") {
  const std::vector<std::string> none;
  for (const char* h : {"localhost", "localhost:8080", "LocalHost:1", "localhost.", "127.0.0.1", "127.0.0.1:8080",
                        "127.255.0.9:65535", "[::1]", "[::1]:8080"}) {
    CAPTURE(h);
    CHECK(host_header_allowed(std::string_view(h), none));
  }
  for (const char* h : {"evil.example", "evil.example:8080", "localhost.evil.example", "127.0.0.1.evil.example",
                        "10.0.0.1", "[::2]:80", "", "localhost:port", "localhost:123456", "[::1", "::1"}) {
    CAPTURE(h);
    CHECK(!host_header_allowed(std::string_view(h), none));
  }
  CHECK(host_header_allowed(std::nullopt, none));  // HTTP/1.0 without Host
  const std::vector<std::string> allowed = {"myhost.lan", "Box:9000"};
  CHECK(host_header_allowed(std::string_view("myhost.lan"), allowed));
  CHECK(host_header_allowed(std::string_view("MYHOST.lan:8080"), allowed));
  CHECK(host_header_allowed(std::string_view("box"), allowed));
  CHECK(!host_header_allowed(std::string_view("other.lan"), allowed));
  CHECK(host_header_allowed(std::string_view("anything"), std::vector<std::string>{"*"}));
}

TEST_CASE("access: API keys from Authorization or X-Api-Key, compared in constant time") {
  using sv = std::string_view;
  CHECK(presented_api_keys(sv("Bearer abc"), std::nullopt) == std::vector<sv>{"abc"});
  CHECK(presented_api_keys(sv("bearer   abc  "), std::nullopt) == std::vector<sv>{"abc"});
  CHECK(presented_api_keys(sv("Basic abc"), std::nullopt).empty());
  CHECK(presented_api_keys(sv("Bearer"), std::nullopt).empty());
  CHECK(presented_api_keys(sv("Bearerabc"), std::nullopt).empty());
  CHECK(presented_api_keys(std::nullopt, sv(" xyz ")) == std::vector<sv>{"xyz"});
  CHECK(presented_api_keys(sv("Bearer a"), sv("b")) == std::vector<sv>{"a", "b"});

  CHECK(constant_time_equal("secret", "secret"));
  CHECK(!constant_time_equal("secreT", "secret"));
  CHECK(!constant_time_equal("secret1", "secret"));
  CHECK(!constant_time_equal("secretsecret", "secret"));  // cyclic reads must not make a repeat match
  CHECK(!constant_time_equal("secre", "secret"));
  CHECK(!constant_time_equal("", "secret"));
  CHECK(!constant_time_equal("", ""));  // an empty configured key never matches

  const std::vector<std::string> keys = {"k1", "second-key"};
  CHECK(api_key_accepted({"k1"}, keys));
  CHECK(api_key_accepted({"wrong", "second-key"}, keys));
  CHECK(!api_key_accepted({"k2"}, keys));
  CHECK(!api_key_accepted({}, keys));
}

TEST_CASE("access: CORS origins and preflight headers") {
  const std::vector<std::string> off;
  CHECK(!origin_allowed("http://a.example", off));
  const std::vector<std::string> some = {"http://a.example", "https://B.example:8443/"};
  CHECK(origin_allowed("http://a.example", some));
  CHECK(origin_allowed("https://b.example:8443", some));
  CHECK(!origin_allowed("http://a.example:81", some));
  CHECK(!origin_allowed("https://a.example", some));
  CHECK(!origin_allowed("", some));
  CHECK(origin_allowed("http://anything", std::vector<std::string>{"*"}));

  CHECK(preflight_allow_headers(std::nullopt) == kCorsDefaultAllowHeaders);
  CHECK(preflight_allow_headers(std::string_view("authorization, x-stainless-os")) == "authorization, x-stainless-os");
  CHECK(preflight_allow_headers(std::string_view("bad\r\nheader")) == kCorsDefaultAllowHeaders);
  CHECK(preflight_allow_headers(std::string_view(std::string(2000, 'a'))) == kCorsDefaultAllowHeaders);
}

TEST_CASE("access: a request's Origin must be allowed or the server's own") {
  using sv = std::string_view;
  const std::vector<std::string> none;
  const std::vector<std::string> app{"http://app.example"};
  CHECK(request_origin_allowed(std::nullopt, sv("localhost:8080"), none));  // not from a page
  CHECK_FALSE(request_origin_allowed(sv("http://evil.example"), sv("localhost:8080"), none));
  CHECK_FALSE(request_origin_allowed(sv("null"), sv("localhost:8080"), none));
  CHECK(request_origin_allowed(sv("http://app.example"), sv("localhost:8080"), app));
  CHECK(request_origin_allowed(sv("http://LOCALHOST:8080"), sv("localhost:8080"), none));  // same origin
  CHECK_FALSE(request_origin_allowed(sv("http://localhost:8081"), sv("localhost:8080"), none));
  CHECK_FALSE(request_origin_allowed(sv("http://localhost:8080"), std::nullopt, none));
  CHECK(same_origin("http://127.0.0.1:8080", sv("127.0.0.1:8080")));
  CHECK_FALSE(same_origin("http://127.0.0.1:8080/", sv("127.0.0.1:8080")));
  CHECK_FALSE(same_origin("127.0.0.1:8080", sv("127.0.0.1:8080")));
}
