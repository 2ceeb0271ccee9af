// From a parsed request to an engine job: prompt forms, context limits, stop strings, sampling.
#include <doctest/doctest.h>

#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <string>

#include "server/completion_job.h"
#include "tests/server/tiny_model.h"

namespace ember::server {
namespace {

const Model& job_model() {
  static const std::unique_ptr<Model> model = Model::load(test_server::tiny_model_path());
  return *model;
}

GenerationJob prepare(const std::string& body, bool chat = false, int64_t n_ctx = 64) {
  CompletionRequest r = chat ? parse_chat_request(body) : parse_completion_request(body);
  return prepare_completion_job(r, chat, job_model(), ChatTemplate::ChatML, n_ctx);
}

std::string error_param(const std::string& body, bool chat = false, int64_t n_ctx = 64) {
  try {
    prepare(body, chat, n_ctx);
  } catch (const BadRequest& e) {
    return e.param();
  }
  return "<accepted>";
}

}  // namespace

TEST_CASE("completion job: text prompts are tokenized with BOS, token prompts are used as they are") {
  const Tokenizer& tok = job_model().tokenizer();
  GenerationJob text = prepare(R"({"prompt":"hello there","max_tokens":4})");
  CHECK(text.prompt == tok.encode("hello there", true, false));
  CHECK(text.max_tokens == 4);

  GenerationJob ids = prepare(R"({"prompt":[5,6,7],"max_tokens":4})");
  CHECK(ids.prompt == std::vector<int32_t>{5, 6, 7});
  GenerationJob nested = prepare(R"({"prompt":[[9,8]]})");
  CHECK(nested.prompt == std::vector<int32_t>{9, 8});
  CHECK(nested.max_tokens == 16);

  const std::string n_vocab = std::to_string(tok.n_vocab());
  try {
    prepare(R"({"prompt":[1,2,)" + n_vocab + "]}");
    FAIL("accepted a token outside the vocabulary");
  } catch (const BadRequest& e) {
    CHECK(e.param() == "prompt");
    CHECK(std::string(e.what()).find("prompt[2]") != std::string::npos);
  }
}

TEST_CASE("completion job: the context window bounds prompt and max_tokens") {
  CHECK(error_param(R"({"prompt":[1,2,3,4],"max_tokens":61})", false, 64) == "max_tokens");
  CHECK(prepare(R"({"prompt":[1,2,3,4],"max_tokens":60})", false, 64).max_tokens == 60);
  std::string long_prompt = R"({"prompt":[)";
  for (int i = 0; i < 64; ++i) long_prompt += (i ? ",5" : "5");
  long_prompt += "]}";
  CHECK(error_param(long_prompt, false, 64) == "prompt");
  // Chat without max_tokens: the rest of the context.
  GenerationJob chat = prepare(R"({"messages":[{"role":"user","content":"hi"}]})", true, 64);
  CHECK(chat.max_tokens == 64 - static_cast<int64_t>(chat.prompt.size()));
  // An empty text prompt is just BOS (as OpenAI accepts it); there is no empty token prompt.
  CHECK(prepare(R"({"prompt":""})").prompt.size() == 1);
}

TEST_CASE("completion job: stop strings, penalties and logit bias reach the job") {
  GenerationJob job = prepare(
      R"({"prompt":"x","stop":["a","bc"],"presence_penalty":1.5,"frequency_penalty":-0.5,"repeat_penalty":1.3,)"
      R"("logit_bias":{"3":5,"4":-100},"seed":77,"top_k":3,"min_p":0.2,"temperature":0.4,"top_p":0.7})");
  CHECK(job.stop == std::vector<std::string>{"a", "bc"});
  CHECK(job.sampling.presence_penalty == doctest::Approx(1.5));
  CHECK(job.sampling.frequency_penalty == doctest::Approx(-0.5));
  CHECK(job.sampling.repeat_penalty == doctest::Approx(1.3));
  REQUIRE(job.sampling.logit_bias.size() == 2);
  for (const auto& [id, bias] : job.sampling.logit_bias) {
    if (id == 3) CHECK(bias == doctest::Approx(5));
    if (id == 4) CHECK(std::isinf(bias));  // -100 bans the token
  }
  CHECK(job.sampling.seed == 77);
  CHECK(job.sampling.top_k == 3);
  CHECK(job.sampling.min_p == doctest::Approx(0.2));
  CHECK(job.sampling.temperature == doctest::Approx(0.4));
  CHECK(job.sampling.top_p == doctest::Approx(0.7));
  CHECK(prepare(R"({"prompt":"x","stop":"\n"})").stop == std::vector<std::string>{"\n"});

  const std::string n_vocab = std::to_string(job_model().tokenizer().n_vocab());
  CHECK(error_param(R"({"prompt":"x","logit_bias":{")" + n_vocab + R"(":1}})") == "logit_bias");
}

}  // namespace ember::server
