// The request parser alone, fed bytes directly: Ember's limits on top of Beast's parser.
#include <doctest/doctest.h>

#include <string>

#include "server/request_parser.h"

using ember::server::RequestParser;
namespace http = boost::beast::http;

namespace {

struct Parsed {
  boost::beast::error_code ec;
  RequestParser::Refusal refusal = RequestParser::Refusal::None;
  bool done = false;
};

Parsed parse(const std::string& bytes, std::uint32_t header_limit = 16 * 1024, std::uint64_t body_limit = 1 << 20) {
  RequestParser p(header_limit, body_limit);
  p.eager(true);
  Parsed out;
  size_t used = 0;
  while (used < bytes.size() && !out.ec && !p.is_done()) {
    used += p.put(boost::asio::buffer(bytes.data() + used, bytes.size() - used), out.ec);
    if (out.ec == http::error::need_more) {
      out.ec = {};
      break;
    }
  }
  out.refusal = p.refusal();
  out.done = p.is_done();
  return out;
}

const std::string kChunkedHead = "POST /x HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n";

}  // namespace

TEST_CASE("request parser: an ordinary request, chunked or not") {
  RequestParser p(16 * 1024, 1 << 20);
  p.eager(true);
  boost::beast::error_code ec;
  const std::string bytes = kChunkedHead + "3\r\nabc\r\n2\r\nde\r\n0\r\nX-Checksum: 1\r\n\r\n";
  p.put(boost::asio::buffer(bytes), ec);
  REQUIRE(!ec);
  REQUIRE(p.is_done());
  CHECK(p.get().body() == "abcde");
  CHECK(p.get()[http::field::host] == "h");
  CHECK(p.get().find("X-Checksum") == p.get().end());  // trailers are dropped
  CHECK(p.get().target() == "/x");

  const auto plain = parse("POST /y HTTP/1.0\r\nHost: h\r\nContent-Length: 2\r\n\r\nok");
  CHECK(plain.done);
  CHECK(!plain.ec);
}

TEST_CASE("request parser: fields too large for Beast's container are refused, never thrown") {
  const auto big_value = parse("GET / HTTP/1.1\r\nX: " + std::string(65534, 'a') + "\r\n\r\n", 1 << 20);
  CHECK(big_value.refusal == RequestParser::Refusal::FieldTooLarge);
  CHECK(big_value.ec == http::error::header_limit);
  const auto big_name = parse("GET / HTTP/1.1\r\n" + std::string(65534, 'n') + ": v\r\n\r\n", 1 << 20);
  CHECK(big_name.refusal == RequestParser::Refusal::FieldTooLarge);
  // Just below the container's limit is fine when the header limit allows it.
  CHECK(parse("GET / HTTP/1.1\r\nX: " + std::string(65533, 'a') + "\r\n\r\n", 1 << 20).done);
  // In a trailer, the budget refuses it first.
  const auto trailer = parse(kChunkedHead + "0\r\nX: " + std::string(65534, 'a') + "\r\n\r\n");
  CHECK(trailer.refusal == RequestParser::Refusal::TrailerTooLarge);
}

TEST_CASE("request parser: trailers spend what the header left of max_header_bytes") {
  std::string trailers;
  while (trailers.size() < 900) trailers += "T: " + std::string(40, 'x') + "\r\n";
  CHECK(parse(kChunkedHead + "0\r\n" + trailers + "\r\n", 2048).done);
  while (trailers.size() < 2100) trailers += "T: " + std::string(40, 'x') + "\r\n";
  CHECK(parse(kChunkedHead + "0\r\n" + trailers + "\r\n", 2048).refusal == RequestParser::Refusal::TrailerTooLarge);
}

TEST_CASE("request parser: one Host, and no transfer coding but chunked") {
  CHECK(parse("GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n").refusal == RequestParser::Refusal::DuplicateHost);
  CHECK(parse("GET / HTTP/1.1\r\nhost: a\r\nHOST: a\r\n\r\n").refusal == RequestParser::Refusal::DuplicateHost);
  for (const char* te : {"gzip, chunked", "gzip", "deflate,chunked", "chunked, chunked", "identity"}) {
    CAPTURE(te);
    CHECK(parse(std::string("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: ") + te + "\r\n\r\n0\r\n\r\n").refusal ==
          RequestParser::Refusal::UnsupportedTransferCoding);
  }
  CHECK(ember::server::plain_chunked_coding(" Chunked "));
  CHECK_FALSE(ember::server::plain_chunked_coding("chunkedx"));
}

TEST_CASE("request parser: the request line's version is known even when the header is refused") {
  RequestParser p(64, 1024);
  boost::beast::error_code ec;
  const std::string bytes = "GET /health HTTP/1.0\r\nX-Big: " + std::string(200, 'a') + "\r\n\r\n";
  CHECK(!p.request_line_parsed());
  p.put(boost::asio::buffer(bytes), ec);
  CHECK(ec == http::error::header_limit);
  CHECK(!p.is_header_done());
  CHECK(p.request_line_parsed());
  CHECK(p.get().version() == 10);

  RequestParser garbled(64, 1024);
  garbled.put(boost::asio::buffer(std::string("GET /health HTTP/9.9\r\n\r\n")), ec);
  CHECK(ec);
  CHECK(!garbled.request_line_parsed());
}
