#pragma once
// The HTTP request parser of every connection: Beast's basic_parser with Ember's rules on top.
// Beast's own request_parser stores each field in a 16-bit-offset container that *throws*
// std::length_error for a name or value over 65,533 bytes (from inside async_read, where no
// handler can catch it), keeps chunked trailers without any limit, and accepts any transfer
// coding that ends in "chunked". This parser instead refuses, with an error code and a reason the
// session turns into a status:
//   - a field name or value too long for the container (431);
//   - trailer fields beyond what is left of the header budget (431): trailers count against
//     max_header_bytes and are dropped, nothing reads them;
//   - a second Host header (400: RFC 9112 section 3.2);
//   - a transfer coding other than plain "chunked" (501: nothing here decodes gzip/deflate).
// No exception leaves it. The request is an ordinary http::request<string_body>.
#include <boost/beast/http.hpp>
#include <cstdint>
#include <string>

namespace ember::server {

class RequestParser final : public boost::beast::http::basic_parser<true> {
 public:
  using Request = boost::beast::http::request<boost::beast::http::string_body>;

  enum class Refusal { None, FieldTooLarge, TrailerTooLarge, DuplicateHost, UnsupportedTransferCoding };

  // `header_limit` bounds the request line plus header fields, and (whatever is left of it) the
  // trailer fields of a chunked body; `body_limit` the body.
  RequestParser(std::uint32_t header_limit, std::uint64_t body_limit);

  Request& get() { return request_; }
  const Request& get() const { return request_; }
  Request release() { return std::move(request_); }

  // Whether the request line was read (get()'s method, target and version are then the
  // request's): Beast parses it as soon as it is complete, before the rest of the header, so a
  // request refused for its header fields still has a version to answer in.
  bool request_line_parsed() const { return request_line_parsed_; }

  // Why parsing stopped with an error of ours (None: Beast's own error, or no error).
  Refusal refusal() const { return refusal_; }

 private:
  using error_code = boost::beast::error_code;
  using string_view = boost::beast::string_view;
  using field = boost::beast::http::field;
  using verb = boost::beast::http::verb;

  void on_request_impl(verb method, string_view method_str, string_view target, int version,
                       error_code& ec) override;
  void on_response_impl(int code, string_view reason, int version, error_code& ec) override;
  void on_field_impl(field name, string_view name_string, string_view value, error_code& ec) override;
  void on_header_impl(error_code& ec) override;
  void on_body_init_impl(boost::optional<std::uint64_t> const& content_length, error_code& ec) override;
  std::size_t on_body_impl(string_view body, error_code& ec) override;
  void on_chunk_header_impl(std::uint64_t size, string_view extensions, error_code& ec) override;
  std::size_t on_chunk_body_impl(std::uint64_t remain, string_view body, error_code& ec) override;
  void on_finish_impl(error_code& ec) override;

  void refuse(Refusal why, error_code& ec);

  Request request_;
  Refusal refusal_ = Refusal::None;
  std::uint64_t header_budget_;  // bytes of fields still allowed (header, then trailers)
  bool request_line_parsed_ = false;
  bool in_trailer_ = false;
  bool have_host_ = false;
};

// True when a Transfer-Encoding value is exactly the "chunked" coding (case-insensitive, with
// optional surrounding whitespace): the only coding Ember decodes.
bool plain_chunked_coding(std::string_view transfer_encoding);

}  // namespace ember::server
