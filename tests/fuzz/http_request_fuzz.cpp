// libFuzzer target for everything a request's bytes reach before the engine: the request parser
// with the daemon's limits, routing, access control, JSON validation of both generation endpoints
// and /tokenize, and the job preparation that turns a request into sampler settings and prompt
// tokens (chat template, tokenizer) on a tiny synthetic model. Any input must end in a parsed
// request or a refusal (an error code, a BadRequest); a crash, a sanitizer report, a hang or any
// other exception is a bug. Built by CMake with -DEMBER_FUZZ=ON; run by tests/fuzz/run.sh.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "core/model/model.h"
#include "core/synth/synth_writer.h"
#include "server/access_control.h"
#include "server/completion_job.h"
#include "server/http_metrics.h"
#include "server/openai_api.h"
#include "server/request_parser.h"
#include "server/tokenize_api.h"
#include "tests/support/scratch_dir.h"

namespace {

using namespace ember;
using namespace ember::server;
namespace http = boost::beast::http;

const Model& tiny_model() {
  static const std::unique_ptr<Model> model = [] {
    synth::SynthOptions o;
    o.preset = "tiny";
    o.type = GgmlType::Q8_0;
    o.output_path = (test::scratch_dir("ember-http-fuzz") / "tiny.gguf").string();
    o.threads = 1;
    synth::write_synth_model(o);
    return Model::load(o.output_path);
  }();
  return *model;
}

std::optional<std::string_view> field(const RequestParser::Request& req, http::field name) {
  const auto it = req.find(name);
  if (it == req.end()) return std::nullopt;
  return std::string_view(it->value().data(), it->value().size());
}

void route(const RequestParser::Request& req) {
  std::string_view target(req.target().data(), req.target().size());
  const std::string_view path = target.substr(0, target.find('?'));
  const Endpoint endpoint = endpoint_of(path);
  (void)endpoint_label(endpoint);
  (void)host_header_allowed(field(req, http::field::host), {"example.org"});
  (void)request_origin_allowed(field(req, http::field::origin), field(req, http::field::host), {"http://app.example"});
  const auto keys = presented_api_keys(field(req, http::field::authorization), std::nullopt);
  (void)api_key_accepted(keys, {"sk-test"});

  RequestLimits limits;
  limits.max_prompt_bytes = 4096;
  limits.max_tokens = 64;
  const Model& model = tiny_model();
  try {
    switch (endpoint) {
      case Endpoint::Completions:
      case Endpoint::ChatCompletions: {
        const bool chat = endpoint == Endpoint::ChatCompletions;
        CompletionRequest cr = chat ? parse_chat_request(req.body(), limits) : parse_completion_request(req.body(), limits);
        for (const ChatTemplate t : {ChatTemplate::ChatML, ChatTemplate::Llama2, ChatTemplate::Llama3}) {
          CompletionRequest copy = cr;
          const GenerationJob job = prepare_completion_job(copy, chat, model, t, /*n_ctx=*/256);
          for (const int32_t id : job.prompt) {
            if (id < 0 || id >= model.tokenizer().n_vocab()) __builtin_trap();
          }
        }
        break;
      }
      case Endpoint::Tokenize:
        (void)tokenize_response(model.tokenizer(), parse_tokenize_request(req.body(), limits.max_prompt_bytes));
        break;
      case Endpoint::Detokenize:
        (void)detokenize_response(model.tokenizer(),
                                  parse_detokenize_request(req.body(), model.tokenizer().n_vocab()));
        break;
      default:
        break;
    }
  } catch (const BadRequest&) {
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  RequestParser parser(/*header_limit=*/8192, /*body_limit=*/16384);
  parser.eager(true);
  boost::beast::error_code ec;
  size_t used = 0;
  // Fed in two pieces, as a socket would deliver it, so both the whole and the split paths run.
  // Bytes the parser left unconsumed are presented again with the next piece, as Beast's read
  // loop does with its buffer: the parser resumes from saved offsets into those bytes.
  const size_t split = size > 0 ? data[0] % (size + 1) : 0;
  for (const size_t to : {split, size}) {
    while (used < to && !parser.is_done()) {
      const size_t n = parser.put(boost::asio::buffer(data + used, to - used), ec);
      used += n;
      if (ec == http::error::need_more) {
        ec = {};
        break;
      }
      if (ec) return 0;  // refused: the session answers 4xx/5xx and closes
      if (n == 0) break;
    }
  }
  if (!parser.is_done()) {
    parser.put_eof(ec);
    if (ec || !parser.is_done()) return 0;
  }
  route(parser.get());
  return 0;
}
