#include "server/read_refusal.h"

#include <string>

namespace ember::server {
namespace http = boost::beast::http;

std::optional<Response> unreadable_request_response(boost::beast::error_code ec, RequestParser::Refusal refusal,
                                                    const ServerOptions& options) {
  if (ec.category() != boost::beast::error_code(http::error::bad_method).category()) return std::nullopt;
  const auto fail = [](http::status status, const std::string& message) {
    return error_response(status, message, "invalid_request_error");
  };
  const std::string header_limit = std::to_string(options.max_header_bytes);
  switch (refusal) {
    case RequestParser::Refusal::FieldTooLarge:
      return fail(http::status::request_header_fields_too_large, "a request header field is too large");
    case RequestParser::Refusal::TrailerTooLarge:
      return fail(http::status::request_header_fields_too_large,
                  "the chunked body's trailer fields exceed max_header_bytes (" + header_limit +
                      ") together with the header");
    case RequestParser::Refusal::DuplicateHost:
      return fail(http::status::bad_request, "the request has more than one Host header");
    case RequestParser::Refusal::UnsupportedTransferCoding:
      return fail(http::status::not_implemented,
                  "only the \"chunked\" transfer coding is supported (no gzip or deflate)");
    case RequestParser::Refusal::None:
      break;
  }
  if (ec == http::error::body_limit) {
    return fail(http::status::payload_too_large,
                "the request body exceeds " + std::to_string(options.max_body_bytes) + " bytes");
  }
  if (ec == http::error::header_limit) {
    return fail(http::status::request_header_fields_too_large, "the request headers are too large");
  }
  if (ec == http::error::buffer_overflow) {
    // Only a header or trailer kept whole in the buffer can fill it.
    return fail(http::status::request_header_fields_too_large,
                "the request headers or trailers exceed max_header_bytes (" + header_limit + ")");
  }
  return fail(http::status::bad_request, "malformed HTTP request: " + ec.message());
}

}  // namespace ember::server
