#include "server/request_parser.h"

#include <algorithm>
#include <cctype>
#include <limits>

namespace ember::server {
namespace http = boost::beast::http;

namespace {

// basic_fields keeps each name and value behind a 16-bit offset (two bytes of which are ": "):
// longer ones would make it throw.
constexpr std::size_t kMaxFieldPart = std::numeric_limits<std::uint16_t>::max() - 2;

// What a field costs against the header budget: "name: value\r\n".
std::uint64_t field_bytes(std::size_t name, std::size_t value) { return std::uint64_t(name) + value + 4; }

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

}  // namespace

bool plain_chunked_coding(std::string_view transfer_encoding) {
  const std::string_view t = trim(transfer_encoding);
  constexpr std::string_view kChunked = "chunked";
  return t.size() == kChunked.size() && std::equal(t.begin(), t.end(), kChunked.begin(), [](char a, char b) {
           return std::tolower(static_cast<unsigned char>(a)) == b;
         });
}

RequestParser::RequestParser(std::uint32_t header_limit, std::uint64_t body_limit) : header_budget_(header_limit) {
  this->header_limit(header_limit);
  this->body_limit(body_limit);
}

void RequestParser::refuse(Refusal why, error_code& ec) {
  refusal_ = why;
  switch (why) {
    case Refusal::FieldTooLarge:
    case Refusal::TrailerTooLarge:
      ec = http::error::header_limit;
      break;
    case Refusal::UnsupportedTransferCoding:
      ec = http::error::bad_transfer_encoding;
      break;
    case Refusal::DuplicateHost:
    case Refusal::None:
      ec = http::error::bad_field;
      break;
  }
}

void RequestParser::on_request_impl(verb method, string_view method_str, string_view target, int version,
                                    error_code& ec) {
  if (method == verb::unknown)
    request_.method_string(method_str);
  else
    request_.method(method);
  request_.target(target);
  request_.version(version);
  request_line_parsed_ = true;
}

void RequestParser::on_response_impl(int, string_view, int, error_code& ec) {
  ec = http::error::bad_method;  // unreachable: this is a request parser
}

void RequestParser::on_field_impl(field name, string_view name_string, string_view value, error_code& ec) {
  const std::uint64_t cost = field_bytes(name_string.size(), value.size());
  if (in_trailer_) {
    // Nothing reads trailers: count them, drop them.
    if (cost > header_budget_) return refuse(Refusal::TrailerTooLarge, ec);
    header_budget_ -= cost;
    return;
  }
  header_budget_ -= std::min(cost, header_budget_);
  if (name_string.size() > kMaxFieldPart || value.size() > kMaxFieldPart) return refuse(Refusal::FieldTooLarge, ec);
  if (name == field::host) {
    if (have_host_) return refuse(Refusal::DuplicateHost, ec);
    have_host_ = true;
  }
  request_.insert(name, name_string, value);
}

void RequestParser::on_header_impl(error_code& ec) {
  const auto te = request_.find(field::transfer_encoding);
  if (te != request_.end() && !plain_chunked_coding(std::string_view(te->value().data(), te->value().size())))
    return refuse(Refusal::UnsupportedTransferCoding, ec);
}

void RequestParser::on_body_init_impl(boost::optional<std::uint64_t> const& content_length, error_code&) {
  // basic_parser has already held a declared length against body_limit.
  if (content_length) request_.body().reserve(static_cast<std::size_t>(*content_length));
}

std::size_t RequestParser::on_body_impl(string_view body, error_code&) {
  request_.body().append(body.data(), body.size());
  return body.size();
}

void RequestParser::on_chunk_header_impl(std::uint64_t size, string_view, error_code&) {
  if (size == 0) in_trailer_ = true;  // the last chunk: what follows are trailer fields
}

std::size_t RequestParser::on_chunk_body_impl(std::uint64_t, string_view body, error_code&) {
  request_.body().append(body.data(), body.size());
  return body.size();
}

void RequestParser::on_finish_impl(error_code&) {}

}  // namespace ember::server
