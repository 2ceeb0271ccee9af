#include "server/tokenize_handler.h"

#include "server/model_lease.h"
#include "server/openai_api.h"
#include "server/tokenize_api.h"

namespace ember::server {
namespace http = boost::beast::http;
using nlohmann::json;

namespace {

// With the model leased: the (de)tokenization itself, on a worker thread.
void answer_tokens(std::shared_ptr<const std::string> body, bool detokenize, RouteContext& ctx, Responder& out) {
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

}  // namespace

void handle_tokens(const Request& req, bool detokenize, RouteContext& ctx, Responder& out) {
  // The model whose vocabulary is meant: `model` in the body when given, else the default one.
  // Found on a worker thread too (the body may be a megabyte of text); a body that is no JSON
  // object is refused by the (de)tokenizer's own parser, with its message.
  struct Found {
    std::string model;
    std::exception_ptr failure;
  };
  auto found = std::make_shared<Found>();
  auto body = std::make_shared<const std::string>(req.body());
  out.offload(
      [found, body] {
        const json j = json::parse(*body, nullptr, /*allow_exceptions=*/false);
        if (!j.is_object() || !j.contains("model")) return;
        if (j["model"].is_string()) {
          found->model = j["model"].get<std::string>();
        } else {
          found->failure = std::make_exception_ptr(BadRequest("'model' must be a string", "model"));
        }
      },
      [found, body, detokenize, &ctx, &out] {
        if (found->failure) std::rethrow_exception(found->failure);
        lease_model(found->model, std::nullopt, ctx, out,
                    [body, detokenize, &ctx, &out] { answer_tokens(body, detokenize, ctx, out); });
      });
}

}  // namespace ember::server
