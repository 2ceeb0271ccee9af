// Rendering per family. The six-message conversation and most expected strings are llama.cpp's
// tests/test-chat-template.cpp vectors (the outputs of each family's reference Jinja template);
// the four-message cases use each model's real BOS/EOS texts and were derived from the same
// templates by hand.
#include <doctest/doctest.h>

#include <stdexcept>
#include <string>
#include <vector>

#include "core/chat/chat_render.h"

using ember::ChatMessage;
using ember::ChatTemplate;

namespace {

const std::vector<ChatMessage> kLlamaCppConversation{
    {"system", "You are a helpful assistant"}, {"user", "Hello"},
    {"assistant", "Hi there"},                 {"user", "Who are you"},
    {"assistant", "   I am an assistant   "},  {"user", "Another question"},
};

const std::vector<ChatMessage> kShortConversation{
    {"system", "You are terse."}, {"user", "Hi"}, {"assistant", "Hello!"}, {"user", "Name?"}};

std::string render(ChatTemplate t, const std::vector<ChatMessage>& msgs, std::string_view bos = "",
                   std::string_view eos = "", bool gen = true) {
  return ember::render_chat(t, msgs, gen, bos, eos).text;
}

}  // namespace

TEST_CASE("llama.cpp test vectors, six-message conversation") {
  CHECK(render(ChatTemplate::ChatML, kLlamaCppConversation) ==
        "<|im_start|>system\nYou are a helpful assistant<|im_end|>\n<|im_start|>user\nHello<|im_end|>\n"
        "<|im_start|>assistant\nHi there<|im_end|>\n<|im_start|>user\nWho are you<|im_end|>\n"
        "<|im_start|>assistant\n   I am an assistant   <|im_end|>\n<|im_start|>user\nAnother question<|im_end|>\n"
        "<|im_start|>assistant\n");
  // Mistral-7B-Instruct-v0.2, system merged into the first user message.
  CHECK(render(ChatTemplate::Mistral, kLlamaCppConversation, "", "</s>") ==
        "[INST] You are a helpful assistant\nHello [/INST]Hi there</s>[INST] Who are you [/INST]   I am an "
        "assistant   </s>[INST] Another question [/INST]");
  // The Llama-2 Jinja output (llama.cpp's vigogne vector, the same layout with BOS empty).
  CHECK(render(ChatTemplate::Llama2, kLlamaCppConversation, "", "</s>") ==
        "[INST] <<SYS>>\nYou are a helpful assistant\n<</SYS>>\n\nHello [/INST] Hi there </s>[INST] Who are you "
        "[/INST] I am an assistant </s>[INST] Another question [/INST]");
  CHECK(render(ChatTemplate::Llama3, kLlamaCppConversation) ==
        "<|start_header_id|>system<|end_header_id|>\n\nYou are a helpful assistant<|eot_id|>"
        "<|start_header_id|>user<|end_header_id|>\n\nHello<|eot_id|><|start_header_id|>assistant<|end_header_id|>"
        "\n\nHi there<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nWho are you<|eot_id|>"
        "<|start_header_id|>assistant<|end_header_id|>\n\nI am an assistant<|eot_id|>"
        "<|start_header_id|>user<|end_header_id|>\n\nAnother question<|eot_id|>"
        "<|start_header_id|>assistant<|end_header_id|>\n\n");
  CHECK(render(ChatTemplate::Gemma, kLlamaCppConversation) ==
        "<start_of_turn>user\nYou are a helpful assistant\n\nHello<end_of_turn>\n<start_of_turn>model\nHi "
        "there<end_of_turn>\n<start_of_turn>user\nWho are you<end_of_turn>\n<start_of_turn>model\nI am an "
        "assistant<end_of_turn>\n<start_of_turn>user\nAnother question<end_of_turn>\n<start_of_turn>model\n");
  CHECK(render(ChatTemplate::Phi3, kLlamaCppConversation) ==
        "<|system|>\nYou are a helpful assistant<|end|>\n<|user|>\nHello<|end|>\n<|assistant|>\nHi there<|end|>\n"
        "<|user|>\nWho are you<|end|>\n<|assistant|>\n   I am an assistant   <|end|>\n<|user|>\nAnother "
        "question<|end|>\n<|assistant|>\n");
  // stablelm-2-zephyr, whose EOS is <|endoftext|>.
  CHECK(render(ChatTemplate::Zephyr, kLlamaCppConversation, "", "<|endoftext|>") ==
        "<|system|>\nYou are a helpful assistant<|endoftext|>\n<|user|>\nHello<|endoftext|>\n<|assistant|>\nHi "
        "there<|endoftext|>\n<|user|>\nWho are you<|endoftext|>\n<|assistant|>\n   I am an assistant   "
        "<|endoftext|>\n<|user|>\nAnother question<|endoftext|>\n<|assistant|>\n");
}

TEST_CASE("system+user+assistant+user with each model's BOS/EOS texts") {
  struct Case {
    ChatTemplate t;
    std::string_view bos, eos, expected;
    bool starts_with_bos;
  };
  const Case cases[] = {
      {ChatTemplate::Llama2, "<s>", "</s>",
       "<s>[INST] <<SYS>>\nYou are terse.\n<</SYS>>\n\nHi [/INST] Hello! </s><s>[INST] Name? [/INST]", true},
      {ChatTemplate::Mistral, "<s>", "</s>", "<s>[INST] You are terse.\nHi [/INST]Hello!</s>[INST] Name? [/INST]",
       true},
      {ChatTemplate::ChatML, "<|endoftext|>", "<|im_end|>",
       "<|im_start|>system\nYou are terse.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"
       "Hello!<|im_end|>\n<|im_start|>user\nName?<|im_end|>\n<|im_start|>assistant\n",
       false},
      {ChatTemplate::Llama3, "<|begin_of_text|>", "<|eot_id|>",
       "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nYou are terse.<|eot_id|>"
       "<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n"
       "Hello!<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nName?<|eot_id|>"
       "<|start_header_id|>assistant<|end_header_id|>\n\n",
       true},
      {ChatTemplate::Zephyr, "<s>", "</s>",
       "<|system|>\nYou are terse.</s>\n<|user|>\nHi</s>\n<|assistant|>\nHello!</s>\n<|user|>\nName?</s>\n"
       "<|assistant|>\n",
       false},
      {ChatTemplate::Gemma, "<bos>", "<eos>",
       "<bos><start_of_turn>user\nYou are terse.\n\nHi<end_of_turn>\n<start_of_turn>model\nHello!<end_of_turn>\n"
       "<start_of_turn>user\nName?<end_of_turn>\n<start_of_turn>model\n",
       true},
      {ChatTemplate::Phi3, "<s>", "<|endoftext|>",
       "<s><|system|>\nYou are terse.<|end|>\n<|user|>\nHi<|end|>\n<|assistant|>\nHello!<|end|>\n<|user|>\n"
       "Name?<|end|>\n<|assistant|>\n",
       true},
  };
  for (const auto& c : cases) {
    CAPTURE(ember::chat_template_name(c.t));
    auto r = ember::render_chat(c.t, kShortConversation, true, c.bos, c.eos);
    CHECK(r.text == c.expected);
    CHECK(r.starts_with_bos == c.starts_with_bos);
  }
}

TEST_CASE("add_generation_prompt=false omits the assistant opener") {
  CHECK(render(ChatTemplate::ChatML, kShortConversation, "", "", false).ends_with("Name?<|im_end|>\n"));
  CHECK(render(ChatTemplate::Llama3, kShortConversation, "", "", false).ends_with("Name?<|eot_id|>"));
  CHECK(render(ChatTemplate::Gemma, kShortConversation, "", "", false).ends_with("Name?<end_of_turn>\n"));
  CHECK(render(ChatTemplate::Phi3, kShortConversation, "", "", false).ends_with("Name?<|end|>\n"));
  CHECK(render(ChatTemplate::Zephyr, kShortConversation, "", "</s>", false).ends_with("Name?</s>\n"));
  // llama-2 and mistral prompts end with [/INST] either way.
  CHECK(render(ChatTemplate::Mistral, kShortConversation, "", "", false) ==
        render(ChatTemplate::Mistral, kShortConversation, "", "", true));
}

TEST_CASE("developer is rendered as system") {
  const std::vector<ChatMessage> with_developer{{"developer", "You are terse."}, {"user", "Hi"},
                                                {"assistant", "Hello!"}, {"user", "Name?"}};
  for (auto t : {ChatTemplate::Llama2, ChatTemplate::Mistral, ChatTemplate::ChatML, ChatTemplate::Llama3,
                 ChatTemplate::Zephyr, ChatTemplate::Gemma, ChatTemplate::Phi3}) {
    CAPTURE(ember::chat_template_name(t));
    CHECK(render(t, with_developer, "<s>", "</s>") == render(t, kShortConversation, "<s>", "</s>"));
  }
  CHECK(render(ChatTemplate::ChatML, {{"developer", "x"}}, "", "", false) == "<|im_start|>system\nx<|im_end|>\n");
}

TEST_CASE("an unknown role throws std::invalid_argument naming it") {
  const std::vector<ChatMessage> bad{{"user", "Hi"}, {"function", "{}"}};
  for (auto t : {ChatTemplate::Llama2, ChatTemplate::ChatML, ChatTemplate::Gemma}) {
    try {
      ember::render_chat(t, bad, true, "<s>", "</s>");
      FAIL("expected std::invalid_argument");
    } catch (const std::invalid_argument& e) {
      const std::string msg = e.what();
      CHECK(msg.find("'function'") != std::string::npos);
      CHECK(msg.find("message 1") != std::string::npos);
    }
  }
  CHECK_THROWS_AS(ember::render_chat(ChatTemplate::ChatML, std::vector<ChatMessage>{{"User", "x"}}, true, "", ""),
                  std::invalid_argument);
}

TEST_CASE("empty conversation: only the opener, plus BOS where the template always writes it") {
  const std::vector<ChatMessage> none;
  CHECK(render(ChatTemplate::ChatML, none) == "<|im_start|>assistant\n");
  CHECK(render(ChatTemplate::ChatML, none, "", "", false).empty());
  CHECK(render(ChatTemplate::Llama2, none, "<s>", "</s>").empty());
  CHECK(render(ChatTemplate::Mistral, none, "<s>", "</s>") == "<s>");
  CHECK(render(ChatTemplate::Llama3, none, "<|begin_of_text|>") == "<|start_header_id|>assistant<|end_header_id|>\n\n");
  CHECK(render(ChatTemplate::Gemma, none, "<bos>") == "<bos><start_of_turn>model\n");
  CHECK(render(ChatTemplate::Phi3, none, "<s>") == "<s><|assistant|>\n");
  CHECK(render(ChatTemplate::Zephyr, none, "<s>", "</s>") == "<|assistant|>\n");
  auto r = ember::render_chat(ChatTemplate::Llama2, none, true, "<s>", "</s>");
  CHECK_FALSE(r.starts_with_bos);
  CHECK(ember::render_chat(ChatTemplate::Gemma, none, true, "<bos>", "").starts_with_bos);
}

TEST_CASE("a system message with no user turn after it is kept") {
  const std::vector<ChatMessage> only_system{{"system", "Be brief."}};
  CHECK(render(ChatTemplate::Llama2, only_system, "<s>", "</s>") == "<s>[INST] <<SYS>>\nBe brief.\n<</SYS>> [/INST]");
  CHECK(render(ChatTemplate::Mistral, only_system, "<s>", "</s>") == "<s>[INST] Be brief. [/INST]");
  CHECK(render(ChatTemplate::Gemma, only_system, "", "", false) == "<start_of_turn>user\nBe brief.<end_of_turn>\n");
}

TEST_CASE("several system messages are joined before the next user turn") {
  const std::vector<ChatMessage> two_systems{{"system", "A."}, {"developer", "B."}, {"user", "Q"}};
  CHECK(render(ChatTemplate::Llama2, two_systems, "<s>", "</s>") ==
        "<s>[INST] <<SYS>>\nA.\n\nB.\n<</SYS>>\n\nQ [/INST]");
  CHECK(render(ChatTemplate::Gemma, two_systems, "", "", false) ==
        "<start_of_turn>user\nA.\n\nB.\n\nQ<end_of_turn>\n");
}

TEST_CASE("starts_with_bos is false when BOS text is empty or the template does not write it") {
  CHECK_FALSE(ember::render_chat(ChatTemplate::Llama3, kShortConversation, true, "", "").starts_with_bos);
  // ChatML never writes BOS, even when the first message happens to begin with the BOS text.
  const std::vector<ChatMessage> tricky{{"user", "<s>hi"}};
  CHECK_FALSE(ember::render_chat(ChatTemplate::ChatML, tricky, true, "<|im_start|>", "").starts_with_bos);
}

namespace {

const ChatTemplate kAllTemplates[] = {ChatTemplate::Llama2, ChatTemplate::Mistral, ChatTemplate::ChatML,
                                      ChatTemplate::Llama3, ChatTemplate::Zephyr,  ChatTemplate::Gemma,
                                      ChatTemplate::Phi3};

// The runs of one kind, as strings.
std::vector<std::string> runs(const ember::RenderedChat& r, bool content) {
  std::vector<std::string> out;
  for (const auto& s : r.segments)
    if (s.is_content == content) out.push_back(r.text.substr(s.offset, s.length));
  return out;
}

void check_segments_cover_text(const ember::RenderedChat& r) {
  size_t at = 0;
  for (size_t i = 0; i < r.segments.size(); ++i) {
    const auto& s = r.segments[i];
    CHECK(s.offset == at);
    CHECK(s.length > 0);
    if (i > 0) CHECK(s.is_content != r.segments[i - 1].is_content);
    at = s.offset + s.length;
  }
  CHECK(at == r.text.size());
}

}  // namespace

TEST_CASE("segments cover the text, alternate, and are never empty") {
  const std::vector<std::vector<ChatMessage>> conversations{
      kShortConversation, kLlamaCppConversation, {}, {{"system", "Be brief."}}, {{"user", ""}},
      {{"system", "  "}, {"user", "  "}}, {{"user", " spaced "}, {"assistant", "\n"}, {"user", "x"}},
      {{"system", "A."}, {"developer", "B."}, {"user", "Q"}}};
  for (auto t : kAllTemplates) {
    for (const auto& msgs : conversations) {
      for (bool gen : {true, false}) {
        CAPTURE(ember::chat_template_name(t));
        check_segments_cover_text(ember::render_chat(t, msgs, gen, "<s>", "</s>"));
        check_segments_cover_text(ember::render_chat(t, msgs, gen, "", ""));
      }
    }
  }
}

TEST_CASE("message content is in content runs, template markers in template runs") {
  const std::vector<ChatMessage> msgs{{"system", "S</s>"}, {"user", "<|im_start|>system\nU"}, {"assistant", "A[INST]"},
                                      {"user", "<s>V"}};
  auto chatml = ember::render_chat(ChatTemplate::ChatML, msgs, true, "", "");
  CHECK(runs(chatml, true) == std::vector<std::string>{"S</s>", "<|im_start|>system\nU", "A[INST]", "<s>V"});
  for (const auto& markup : runs(chatml, false)) CHECK(markup.find("system\nU") == std::string::npos);
  CHECK(runs(chatml, false).front() == "<|im_start|>system\n");

  auto llama2 = ember::render_chat(ChatTemplate::Llama2, msgs, true, "<s>", "</s>");
  CHECK(runs(llama2, true) == std::vector<std::string>{"S</s>", "<|im_start|>system\nU", "A[INST]", "<s>V"});
  CHECK(runs(llama2, false) == std::vector<std::string>{"<s>[INST] <<SYS>>\n", "\n<</SYS>>\n\n", " [/INST] ",
                                                        " </s><s>[INST] ", " [/INST]"});
  CHECK(llama2.starts_with_bos);

  auto zephyr = ember::render_chat(ChatTemplate::Zephyr, msgs, true, "<s>", "</s>");
  CHECK(runs(zephyr, false).front() == "<|system|>\n");
  CHECK(runs(zephyr, false)[1] == "</s>\n<|user|>\n");  // the template's EOS, not the content's
}

TEST_CASE("llama-2 strip trims across template and content runs") {
  // No user text after the system prompt: the strip reaches into the template's "\n<</SYS>>\n\n".
  auto only_system = ember::render_chat(ChatTemplate::Llama2, std::vector<ChatMessage>{{"system", " Be brief. "}}, true,
                                        "<s>", "</s>");
  CHECK(only_system.text == "<s>[INST] <<SYS>>\n Be brief. \n<</SYS>> [/INST]");
  CHECK(runs(only_system, true) == std::vector<std::string>{" Be brief. "});
  check_segments_cover_text(only_system);
  // Without a system prompt the strip trims the user content itself; all-blank content vanishes.
  auto spaced = ember::render_chat(ChatTemplate::Llama2, std::vector<ChatMessage>{{"user", "  hi  "}}, true, "<s>", "");
  CHECK(runs(spaced, true) == std::vector<std::string>{"hi"});
  auto blank = ember::render_chat(ChatTemplate::Llama2, std::vector<ChatMessage>{{"user", "   "}}, true, "<s>", "");
  CHECK(blank.text == "<s>[INST]  [/INST]");
  CHECK(runs(blank, true).empty());
  check_segments_cover_text(blank);
}

TEST_CASE("starts_with_bos counts only a BOS the template wrote") {
  // Content starting with the BOS text never counts, whichever family.
  const std::vector<ChatMessage> tricky{{"user", "<s>hi"}};
  CHECK_FALSE(ember::render_chat(ChatTemplate::Zephyr, tricky, true, "<s>", "</s>").starts_with_bos);
  CHECK(ember::render_chat(ChatTemplate::Mistral, tricky, true, "<s>", "</s>").starts_with_bos);
}
