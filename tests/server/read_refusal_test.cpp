// The answers to requests the parser stopped on, without sockets.
#include <doctest/doctest.h>

#include "server/read_refusal.h"

using namespace ember::server;

TEST_CASE("read refusal: parser errors map to statuses; transport errors get no answer") {
  namespace http = boost::beast::http;
  ServerOptions o;
  auto res = unreadable_request_response(http::error::body_limit, RequestParser::Refusal::None, o);
  REQUIRE(res);
  CHECK(res->result() == http::status::payload_too_large);
  res = unreadable_request_response(http::error::bad_field, RequestParser::Refusal::DuplicateHost, o);
  REQUIRE(res);
  CHECK(res->result() == http::status::bad_request);
  res = unreadable_request_response(http::error::bad_version, RequestParser::Refusal::None, o);
  REQUIRE(res);
  CHECK(res->body().find("malformed HTTP request") != std::string::npos);
  CHECK(!unreadable_request_response(boost::asio::error::connection_reset, RequestParser::Refusal::None, o));
}
