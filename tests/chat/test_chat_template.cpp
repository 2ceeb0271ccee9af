// Family names, recognition from Jinja sources (short snippets modelled on the published templates),
// the fallback rule, and recognition from a real GGUF file's tokenizer.chat_template.
#include <doctest/doctest.h>

#include <stdexcept>
#include <string>

#include "core/chat/chat_template.h"
#include "core/gguf/gguf_file.h"
#include "tests/support/fixtures.h"

using ember::ChatTemplate;
using ember::ChatTemplateSource;

TEST_CASE("chat template names round-trip and aliases parse") {
  for (auto t : {ChatTemplate::Llama2, ChatTemplate::Mistral, ChatTemplate::ChatML, ChatTemplate::Llama3,
                 ChatTemplate::Zephyr, ChatTemplate::Gemma, ChatTemplate::Phi3}) {
    auto parsed = ember::parse_chat_template_name(ember::chat_template_name(t));
    REQUIRE(parsed.has_value());
    CHECK(*parsed == t);
  }
  CHECK(ember::chat_template_name(ChatTemplate::Llama2) == "llama-2");
  CHECK(ember::chat_template_name(ChatTemplate::Phi3) == "phi-3");
  CHECK(ember::parse_chat_template_name("llama3") == ChatTemplate::Llama3);
  CHECK(ember::parse_chat_template_name("phi3") == ChatTemplate::Phi3);
  CHECK_FALSE(ember::parse_chat_template_name("ChatML").has_value());  // names are case-sensitive
  CHECK_FALSE(ember::parse_chat_template_name("").has_value());
  CHECK_FALSE(ember::parse_chat_template_name("vicuna").has_value());
  CHECK(ember::chat_template_names() == "llama-2, mistral, chatml, llama-3, zephyr, gemma, phi-3");
}

TEST_CASE("detect_chat_template recognises each family from its Jinja source") {
  const std::string chatml =
      "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + "
      "'<|im_end|>' + '\\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";
  const std::string llama3 =
      "{% set loop_messages = messages %}{% for message in loop_messages %}{% set content = "
      "'<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n'+ message['content'] | trim + "
      "'<|eot_id|>' %}{% if loop.index0 == 0 %}{% set content = bos_token + content %}{% endif %}{{ content }}"
      "{% endfor %}{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}{% endif %}";
  const std::string llama2 =
      "{% if messages[0]['role'] == 'system' %}{% set loop_messages = messages[1:] %}{% set system_message = "
      "messages[0]['content'] %}{% else %}{% set loop_messages = messages %}{% set system_message = false %}"
      "{% endif %}{% for message in loop_messages %}{% if loop.index0 == 0 and system_message != false %}"
      "{% set content = '<<SYS>>\\n' + system_message + '\\n<</SYS>>\\n\\n' + message['content'] %}{% else %}"
      "{% set content = message['content'] %}{% endif %}{% if message['role'] == 'user' %}{{ bos_token + "
      "'[INST] ' + content.strip() + ' [/INST]' }}{% elif message['role'] == 'assistant' %}{{ ' '  + "
      "content.strip() + ' ' + eos_token }}{% endif %}{% endfor %}";
  const std::string mistral =
      "{{ bos_token }}{% for message in messages %}{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}"
      "{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}"
      "{% if message['role'] == 'user' %}{{ '[INST] ' + message['content'] + ' [/INST]' }}{% elif "
      "message['role'] == 'assistant' %}{{ message['content'] + eos_token}}{% endif %}{% endfor %}";
  const std::string gemma =
      "{{ bos_token }}{% if messages[0]['role'] == 'system' %}{{ raise_exception('System role not supported') }}"
      "{% endif %}{% for message in messages %}{% if (message['role'] == 'assistant') %}{% set role = 'model' %}"
      "{% else %}{% set role = message['role'] %}{% endif %}{{ '<start_of_turn>' + role + '\\n' + "
      "message['content'] | trim + '<end_of_turn>\\n' }}{% endfor %}{% if add_generation_prompt %}"
      "{{'<start_of_turn>model\\n'}}{% endif %}";
  const std::string phi3_mini =
      "{{ bos_token }}{% for message in messages %}{% if (message['role'] == 'user') %}{{'<|user|>' + '\\n' + "
      "message['content'] + '<|end|>' + '\\n' + '<|assistant|>' + '\\n'}}{% elif (message['role'] == "
      "'assistant') %}{{message['content'] + '<|end|>' + '\\n'}}{% endif %}{% endfor %}";
  // Phi-3-small builds the role tag from the role name: only <|assistant|> appears literally.
  const std::string phi3_small =
      "{{ bos_token }}{% for message in messages %}{{'<|' + message['role'] + '|>' + '\\n' + "
      "message['content'] + '<|end|>\\n' }}{% endfor %}{% if add_generation_prompt %}{{ '<|assistant|>\\n' }}"
      "{% else %}{{ eos_token }}{% endif %}";
  const std::string zephyr =
      "{% for message in messages %}\n{% if message['role'] == 'user' %}\n{{ '<|user|>\\n' + "
      "message['content'] + eos_token }}\n{% elif message['role'] == 'system' %}\n{{ '<|system|>\\n' + "
      "message['content'] + eos_token }}\n{% elif message['role'] == 'assistant' %}\n{{ '<|assistant|>\\n'  + "
      "message['content'] + eos_token }}\n{% endif %}\n{% if loop.last and add_generation_prompt %}\n"
      "{{ '<|assistant|>' }}\n{% endif %}\n{% endfor %}";
  const std::string zephyr_literal_eos = "{% for m in messages %}{{ '<|user|>\\n' + m['content'] + '</s>' }}{% endfor %}";

  CHECK(ember::detect_chat_template(chatml) == ChatTemplate::ChatML);
  CHECK(ember::detect_chat_template(llama3) == ChatTemplate::Llama3);
  CHECK(ember::detect_chat_template(llama2) == ChatTemplate::Llama2);
  CHECK(ember::detect_chat_template(mistral) == ChatTemplate::Mistral);
  CHECK(ember::detect_chat_template(gemma) == ChatTemplate::Gemma);
  CHECK(ember::detect_chat_template(phi3_mini) == ChatTemplate::Phi3);
  CHECK(ember::detect_chat_template(phi3_small) == ChatTemplate::Phi3);
  CHECK(ember::detect_chat_template(zephyr) == ChatTemplate::Zephyr);
  CHECK(ember::detect_chat_template(zephyr_literal_eos) == ChatTemplate::Zephyr);
}

TEST_CASE("detect_chat_template returns nullopt for unknown or empty sources") {
  CHECK_FALSE(ember::detect_chat_template("").has_value());
  CHECK_FALSE(ember::detect_chat_template("{% for m in messages %}{{ m['content'] }}{% endfor %}").has_value());
  // Vicuna-style: no marker of a supported family.
  CHECK_FALSE(ember::detect_chat_template("{{ 'USER: ' + m['content'] + '\\nASSISTANT:' }}").has_value());
  // Role tags alone, without an end-of-turn marker, are not enough to call it Zephyr.
  CHECK_FALSE(ember::detect_chat_template("<|user|>\n{{ m['content'] }}").has_value());
}

TEST_CASE("fallback: llama-2 for SentencePiece vocabs, chatml otherwise") {
  CHECK(ember::fallback_chat_template("llama") == ChatTemplate::Llama2);
  CHECK(ember::fallback_chat_template("gpt2") == ChatTemplate::ChatML);
  CHECK(ember::fallback_chat_template("") == ChatTemplate::ChatML);
  CHECK(ember::fallback_chat_template("bert") == ChatTemplate::ChatML);
}

TEST_CASE("resolve_chat_template: override, then detection, then fallback") {
  const std::string chatml_src = "{{'<|im_start|>' + message['role'] }}";
  auto r = ember::resolve_chat_template(std::string_view("gemma"), chatml_src, "llama");
  CHECK(r.family == ChatTemplate::Gemma);
  CHECK(r.source == ChatTemplateSource::Override);

  r = ember::resolve_chat_template(std::nullopt, chatml_src, "llama");
  CHECK(r.family == ChatTemplate::ChatML);
  CHECK(r.source == ChatTemplateSource::Detected);

  r = ember::resolve_chat_template(std::nullopt, std::string_view("{{ m.content }}"), "llama");
  CHECK(r.family == ChatTemplate::Llama2);
  CHECK(r.source == ChatTemplateSource::Fallback);

  r = ember::resolve_chat_template(std::nullopt, std::nullopt, "gpt2");
  CHECK(r.family == ChatTemplate::ChatML);
  CHECK(r.source == ChatTemplateSource::Fallback);

  try {
    ember::resolve_chat_template(std::string_view("alpaca"), std::nullopt, "llama");
    FAIL("expected std::invalid_argument");
  } catch (const std::invalid_argument& e) {
    const std::string msg = e.what();
    CHECK(msg.find("'alpaca'") != std::string::npos);
    CHECK(msg.find("chatml") != std::string::npos);
  }
}

namespace {
ember::ResolvedChatTemplate resolve_from_gguf(const std::string& fixture) {
  auto path = ember::test::fixture(fixture);
  if (!path) return {ChatTemplate::ChatML, ChatTemplateSource::Fallback};
  auto file = ember::gguf::GgufFile::open(path->string());
  const auto& md = file.metadata();
  auto jinja = md.get_string("tokenizer.chat_template");
  auto model = md.get_string("tokenizer.ggml.model").value_or("");
  std::optional<std::string_view> src;
  if (jinja) src = *jinja;
  return ember::resolve_chat_template(std::nullopt, src, model);
}
}  // namespace

TEST_CASE("resolve from real GGUF metadata" * ember::test::needs_fixtures) {
  if (!ember::test::fixtures_dir()) {
    ember::test::skip("fixture vocab/*.gguf (chat templates) not found");
    return;
  }
  auto phi3 = resolve_from_gguf("vocab/ggml-vocab-phi-3.gguf");  // carries Phi-3-mini's template
  CHECK(phi3.family == ChatTemplate::Phi3);
  CHECK(phi3.source == ChatTemplateSource::Detected);
  auto spm = resolve_from_gguf("vocab/ggml-vocab-llama-spm.gguf");  // no template, SentencePiece
  CHECK(spm.family == ChatTemplate::Llama2);
  CHECK(spm.source == ChatTemplateSource::Fallback);
  auto gpt2 = resolve_from_gguf("vocab/ggml-vocab-gpt-2.gguf");  // no template, byte-level BPE
  CHECK(gpt2.family == ChatTemplate::ChatML);
  CHECK(gpt2.source == ChatTemplateSource::Fallback);
}
