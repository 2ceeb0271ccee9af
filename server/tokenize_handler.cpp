#include "server/tokenize_handler.h"

#include "server/tokenize_api.h"

namespace ember::server {
namespace http = boost::beast::http;
using nlohmann::json;

void handle_tokens(const Request& req, bool detokenize, RouteContext& ctx, Responder& out) {
  struct Outcome {
    json body;
    std::exception_ptr failure;
  };
  auto outcome = std::make_shared<Outcome>();
  auto body = std::make_shared<std::string>(req.body());
  const size_t max_prompt_bytes = ctx.state.options.limits.max_prompt_bytes;
  EngineWorker& engine = *ctx.engine;
  out.offload(
      [outcome, body, detokenize, max_prompt_bytes, &engine] {
        const Tokenizer& tok = engine.model().tokenizer();
        try {
          if (detokenize) {
            outcome->body = detokenize_response(tok, parse_detokenize_request(*body, tok.n_vocab()));
          } else {
            outcome->body = tokenize_response(tok, parse_tokenize_request(*body, max_prompt_bytes));
          }
        } catch (...) {
          outcome->failure = std::current_exception();
        }
      },
      [outcome, &out] {
        if (outcome->failure) std::rethrow_exception(outcome->failure);
        out.send(json_response(http::status::ok, outcome->body));
      });
}

}  // namespace ember::server
