#include "server/tokenize_handler.h"

#include "server/model_lease.h"
#include "server/openai_api.h"
#include "server/tokenize_api.h"

namespace ember::server {
namespace http = boost::beast::http;
using nlohmann::json;

namespace {

// With the model leased: the (de)tokenization itself, on a worker thread.
void answer_tokens(std::shared_ptr<const json> body, bool detokenize, RouteContext& ctx, Responder& out) {
  struct Outcome {
    json body;
    std::exception_ptr failure;
  };
  auto outcome = std::make_shared<Outcome>();
  const size_t max_prompt_bytes = ctx.state.options.limits.max_prompt_bytes;
  LeasePtr lease = ctx.lease;
  out.offload(
      [outcome, body, detokenize, max_prompt_bytes, lease] {
        const Tokenizer& tok = lease->engine().model().tokenizer();
        try {
          if (detokenize) {
            outcome->body = detokenize_response(tok, detokenize_request_from(*body, tok.n_vocab()));
          } else {
            outcome->body = tokenize_response(tok, tokenize_request_from(*body, max_prompt_bytes));
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

}  // namespace

void handle_tokens(const Request& req, bool detokenize, RouteContext& ctx, Responder& out) {
  // The model whose vocabulary is meant: `model` in the body when given, else the default one.
  // The body (up to a megabyte of text) is parsed once, on a worker thread.
  struct Parsed {
    std::shared_ptr<const json> body;
    std::string model;
    std::exception_ptr failure;
  };
  auto parsed = std::make_shared<Parsed>();
  auto text = std::make_shared<const std::string>(req.body());
  out.offload(
      [parsed, text] {
        try {
          auto body = std::make_shared<const json>(parse_tokens_body(*text));
          if (const auto it = body->find("model"); it != body->end() && !it->is_null()) {
            if (!it->is_string()) throw BadRequest("'model' must be a string", "model");
            parsed->model = it->get<std::string>();
          }
          parsed->body = std::move(body);
        } catch (...) {
          parsed->failure = std::current_exception();
        }
      },
      [parsed, detokenize, &ctx, &out] {
        if (parsed->failure) std::rethrow_exception(parsed->failure);
        lease_model(parsed->model, std::nullopt, ctx, out,
                    [body = parsed->body, detokenize, &ctx, &out] { answer_tokens(body, detokenize, ctx, out); });
      });
}

}  // namespace ember::server
