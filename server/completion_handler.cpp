#include "server/completion_handler.h"

#include <algorithm>

#include "server/completion_events.h"
#include "server/completion_job.h"
#include "server/http_message.h"
#include "server/model_lease.h"
#include "server/openai_api.h"
#include "server/unix_time.h"

namespace ember::server {
namespace http = boost::beast::http;

namespace {

// Prepares the job off the I/O thread, then (back on the connection) starts it, unless the server
// began to stop meanwhile.
void submit(CompletionRequest request, bool chat, RouteContext& ctx, Responder& out) {
  struct Outcome {
    CompletionRequest request;
    GenerationJob job;
    std::exception_ptr failure;
  };
  auto outcome = std::make_shared<Outcome>();
  outcome->request = std::move(request);
  ServerState& state = ctx.state;
  LeasePtr lease = ctx.lease;
  EngineWorker& engine = lease->engine();
  const ChatTemplate chat_template = lease->model().chat_template;
  out.offload(
      [outcome, chat, chat_template, &engine] {
        try {
          outcome->job =
              prepare_completion_job(outcome->request, chat, engine.model(), chat_template, engine.n_ctx());
        } catch (...) {
          outcome->failure = std::current_exception();  // a worker thread must not end on it
        }
      },
      [outcome, chat, chat_template, &state, lease, &out] {
        EngineWorker& engine = lease->engine();
        if (outcome->failure) std::rethrow_exception(outcome->failure);
        if (state.stopping.load()) {
          return out.send(unavailable_response("the server is shutting down", "server_shutdown", nullptr),
                          /*close=*/true);
        }
        CompletionShape shape;
        shape.chat = chat;
        shape.stream = outcome->request.stream;
        shape.include_usage = outcome->request.stream && outcome->request.include_usage;
        shape.id = (chat ? "chatcmpl-" : "cmpl-") + std::to_string(state.next_id.fetch_add(1));
        shape.created = unix_now();
        shape.model = lease->model().id;
        const GenerationJob& job = outcome->job;
        shape.prompt_tokens = static_cast<int64_t>(job.prompt.size());
        for (const auto& later : job.later_prompts) shape.prompt_tokens += static_cast<int64_t>(later.size());
        shape.logprobs = job.top_logprobs >= 0;
        shape.choices_per_prompt = std::max(1, job.choices);
        if (outcome->request.echo) {
          for (PromptInput& p : outcome->request.prompts) shape.echo.push_back(std::move(p.text));
        }
        if (chat && outcome->request.tools.active()) shape.tool_syntax = tool_syntax(chat_template);
        outcome->job.hold = lease;  // the model stays loaded until the generation ends
        out.run_generation(engine, std::move(outcome->job), std::make_shared<CompletionEvents>(std::move(shape)));
      });
}

}  // namespace

void handle_completion(const Request& req, bool chat, RouteContext& ctx, Responder& out) {
  const RequestLimits& limits = ctx.state.options.limits;
  CompletionRequest request;
  try {
    request = chat ? parse_chat_request(req.body(), limits) : parse_completion_request(req.body(), limits);
  } catch (const BadRequest& e) {
    return out.send(
        error_response(http::status::bad_request, e.what(), "invalid_request_error", e.param()));
  }
  // A model the server does not serve is an error, never another model's answer (a typo must not
  // be answered by whatever is loaded); not naming one means the default model.
  auto shared = std::make_shared<CompletionRequest>(std::move(request));
  const std::string model = shared->model;
  lease_model(model, shared->keep_alive, ctx, out, [shared, chat, &ctx, &out] { submit(std::move(*shared), chat, ctx, out); });
}

}  // namespace ember::server
