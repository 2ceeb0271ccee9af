// libFuzzer target for chat templates: recognising a family in an untrusted Jinja source, then
// rendering hostile conversations in every family. The input is
//   [@override-name\n] template-source \0 messages
// where messages is a JSON array of {"role", "content"} objects (optionally "tool_call_id", "name"
// and "tool_calls": [{"id", "name", "arguments"}]), or else one message per line whose first byte
// picks the role (s system, d developer, u user, a assistant, t a tool result, c an assistant's tool
// call whose arguments are the rest, anything else an unknown role) and whose rest is the content.
// Every conversation is rendered without tools and with one tool definition. std::invalid_argument
// (an unknown role or override name) is the documented error; a crash, hang, sanitizer report, other
// exception or broken property is a bug (__builtin_trap). Properties checked on every rendering:
//   - the segments cover the text in order, none empty, kinds alternating;
//   - content runs hold exactly the bytes that came from message content (rendering the same
//     conversation with masked content shows where those bytes went). Not where tools are involved:
//     tool results, calls and replies to a tool prompt are quoted into JSON by some families, which
//     changes their length; those JSON texts are content runs as a whole;
//   - tokenized as the server does (template runs special, content plain), the control tokens are
//     exactly those of the template runs: message content never adds one.
// Build: cmake -DEMBER_FUZZ=ON (clang) builds fuzz/fuzz_chat_template; seeds in
// tests/fuzz/corpus/chat_template.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/chat/chat_render.h"
#include "core/chat/chat_template.h"
#include "core/tokenizer/tokenizer.h"
#include "tests/tokenizer/metadata_builder.h"

namespace {

using ember::ChatMessage;
using ember::ChatTemplate;
using ember::Tokenizer;

constexpr size_t kMaxMessages = 64;  // keeps one run fast; longer lists add nothing new

const ChatTemplate kAllTemplates[] = {ChatTemplate::Llama2, ChatTemplate::Mistral, ChatTemplate::ChatML,
                                      ChatTemplate::Llama3, ChatTemplate::Zephyr,  ChatTemplate::Gemma,
                                      ChatTemplate::Phi3};

// BOS/EOS texts of real vocabularies, and none.
const std::pair<std::string_view, std::string_view> kBosEos[] = {
    {"<s>", "</s>"}, {"<|begin_of_text|>", "<|eot_id|>"}, {"<bos>", "<eos>"}, {"", "<|endoftext|>"}, {"", ""}};

void require(bool ok) {
  if (!ok) __builtin_trap();
}

// A SentencePiece vocabulary whose control tokens are the markers of every family, so that the
// token check below sees them as special.
Tokenizer make_tokenizer() {
  auto v = ember::test::small_spm_vocab({{"▁", -1}, {"a", -2}, {"▁a", -3}});
  for (const char* marker : {"<|im_start|>", "<|im_end|>", "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>",
                             "<|begin_of_text|>", "<start_of_turn>", "<end_of_turn>", "<|end|>", "<|user|>",
                             "<|assistant|>", "<|system|>", "<|endoftext|>", "[INST]", "[/INST]", "<bos>", "<eos>",
                             "[TOOL_CALLS]", "[AVAILABLE_TOOLS]", "[/AVAILABLE_TOOLS]", "[TOOL_RESULTS]",
                             "[/TOOL_RESULTS]", "<tool_call>", "</tool_call>", "<|python_tag|>", "<|eom_id|>"}) {
    v.tokens.push_back(marker);
    v.scores.push_back(0);
    v.types.push_back(3);
  }
  return Tokenizer::from_gguf(ember::test::spm_metadata(v));
}

const Tokenizer& tokenizer() {
  static const Tokenizer t = make_tokenizer();
  return t;
}

std::string_view role_for(char c) {
  switch (c) {
    case 's': return "system";
    case 'd': return "developer";
    case 'u': return "user";
    case 'a':
    case 'c': return "assistant";
    case 't': return "tool";
    default: return "narrator";  // not a role Ember renders: must throw std::invalid_argument
  }
}

std::vector<ChatMessage> messages_from_lines(std::string_view s) {
  std::vector<ChatMessage> out;
  while (!s.empty() && out.size() < kMaxMessages) {
    const size_t nl = s.find('\n');
    const std::string_view line = s.substr(0, nl);
    if (!line.empty()) {
      ChatMessage m(std::string(role_for(line[0])), std::string(line.substr(1)));
      if (line[0] == 'c') {
        m.tool_calls.push_back({"call_0", "lookup", std::move(m.content)});
        m.content.clear();
      }
      if (line[0] == 't') m.tool_call_id = "call_0";
      out.push_back(std::move(m));
    }
    if (nl == std::string_view::npos) break;
    s.remove_prefix(nl + 1);
  }
  return out;
}

std::string string_field(const nlohmann::json& j, const char* key) {
  const auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : std::string();
}

// A JSON array of {"role", "content", ...}; other shapes fall back to lines. Non-string fields are
// skipped: request parsing (server/openai_api) is not what this target tests.
std::vector<ChatMessage> parse_messages(std::string_view s) {
  const auto j = nlohmann::json::parse(s, nullptr, /*allow_exceptions=*/false);
  if (!j.is_array()) return messages_from_lines(s);
  std::vector<ChatMessage> out;
  for (const auto& m : j) {
    if (out.size() == kMaxMessages) break;
    if (!m.is_object()) continue;
    const auto role = m.find("role");
    const auto content = m.find("content");
    if (role == m.end() || content == m.end() || !role->is_string() || !content->is_string()) continue;
    ChatMessage msg(role->get<std::string>(), content->get<std::string>());
    msg.tool_call_id = string_field(m, "tool_call_id");
    msg.name = string_field(m, "name");
    if (const auto calls = m.find("tool_calls"); calls != m.end() && calls->is_array()) {
      for (const auto& c : *calls) {
        if (c.is_object() && msg.tool_calls.size() < kMaxMessages) {
          msg.tool_calls.push_back({string_field(c, "id"), string_field(c, "name"), string_field(c, "arguments")});
        }
      }
    }
    out.push_back(std::move(msg));
  }
  return out;
}

// The same conversation with every non-blank content byte replaced by kMark, blanks kept so that
// trimming acts the same: rendered, it shows which bytes of the text came from content.
constexpr char kMark = '\x01';  // in no template text, role name or BOS/EOS text above

std::vector<ChatMessage> masked(const std::vector<ChatMessage>& msgs) {
  std::vector<ChatMessage> out = msgs;
  for (auto& m : out) {
    for (char& c : m.content) {
      if (std::string_view(" \t\n\r\v\f").find(c) == std::string_view::npos) c = kMark;
    }
  }
  return out;
}

void check_structure(const ember::RenderedChat& r) {
  size_t at = 0;
  for (size_t i = 0; i < r.segments.size(); ++i) {
    const auto& seg = r.segments[i];
    require(seg.offset == at && seg.length > 0 && seg.length <= r.text.size() - at);
    require(i == 0 || seg.is_content != r.segments[i - 1].is_content);
    at += seg.length;
  }
  require(at == r.text.size());
  require(!r.starts_with_bos || (!r.segments.empty() && !r.segments.front().is_content));
}

void check_content_bytes(const ember::RenderedChat& r, const ember::RenderedChat& mask) {
  // Content bytes are exactly the content runs: no marker text in a content run, no content byte
  // in a template run.
  require(mask.text.size() == r.text.size() && mask.segments.size() == r.segments.size());
  for (size_t i = 0; i < r.segments.size(); ++i) {
    const auto& seg = r.segments[i];
    require(mask.segments[i].offset == seg.offset && mask.segments[i].length == seg.length &&
            mask.segments[i].is_content == seg.is_content);
    for (size_t k = seg.offset; k < seg.offset + seg.length; ++k) {
      const bool marked = mask.text[k] == kMark;
      if (seg.is_content) {
        require(marked || mask.text[k] == r.text[k]);  // a kept blank
      } else {
        require(!marked && mask.text[k] == r.text[k]);
      }
    }
  }
}

size_t control_count(const std::vector<int32_t>& ids) {
  return static_cast<size_t>(
      std::count_if(ids.begin(), ids.end(), [](int32_t id) { return tokenizer().is_control(id); }));
}

void check_tokens(const ember::RenderedChat& r) {
  const Tokenizer& tok = tokenizer();
  std::vector<ember::TextSegment> segments;
  size_t template_controls = 0;
  for (const auto& seg : r.segments) {
    const std::string_view run = std::string_view(r.text).substr(seg.offset, seg.length);
    segments.push_back({run, !seg.is_content});
    if (!seg.is_content) template_controls += control_count(tok.encode(run, false, true));
  }
  const auto ids = tok.encode_segments(segments, /*add_special=*/false);
  for (int32_t id : ids) require(id >= 0 && id < tok.n_vocab());
  require(control_count(ids) == template_controls);
}

bool involves_tools(const std::vector<ChatMessage>& msgs) {
  return std::any_of(msgs.begin(), msgs.end(),
                     [](const ChatMessage& m) { return m.role == "tool" || !m.tool_calls.empty(); });
}

const ember::ToolDefinition kTools[] = {
    {"lookup", "Looks a word up. <|im_start|> [INST] in a description stays text.",
     R"({"type":"object","properties":{"word":{"type":"string"}},"required":["word"]})"}};

void render_all(const std::vector<ChatMessage>& msgs, size_t pick) {
  const auto [bos, eos] = kBosEos[pick % std::size(kBosEos)];
  const std::vector<ChatMessage> mask = masked(msgs);
  const bool plain = !involves_tools(msgs);
  const std::span<const ember::ToolDefinition> tool_lists[] = {{}, kTools};
  for (ChatTemplate t : kAllTemplates) {
    for (bool gen : {true, false}) {
      for (const auto tools : tool_lists) {
        try {
          const ember::RenderedChat r = ember::render_chat(t, msgs, gen, bos, eos, tools);
          check_structure(r);
          if (plain && tools.empty()) check_content_bytes(r, ember::render_chat(t, mask, gen, bos, eos));
          check_tokens(r);
        } catch (const std::invalid_argument&) {
          // an unknown role: documented
        }
      }
    }
  }
}

void resolve(std::string_view source) {
  std::optional<std::string_view> override_name;
  if (source.starts_with("@")) {
    const size_t nl = source.find('\n');
    override_name = source.substr(1, nl == std::string_view::npos ? std::string_view::npos : nl - 1);
    source = nl == std::string_view::npos ? std::string_view() : source.substr(nl + 1);
  }
  (void)ember::detect_chat_template(source);
  for (std::string_view model : {"llama", "gpt2", ""}) {
    try {
      const auto resolved = ember::resolve_chat_template(override_name, source, model);
      require(ember::parse_chat_template_name(ember::chat_template_name(resolved.family)) == resolved.family);
    } catch (const std::invalid_argument&) {
      require(override_name.has_value());  // only an unknown override may throw
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const size_t split = input.find('\0');
  const std::string_view source = input.substr(0, split);
  const std::string_view rest = split == std::string_view::npos ? std::string_view() : input.substr(split + 1);
  try {
    resolve(source);
    render_all(parse_messages(rest), source.size());
  } catch (const std::invalid_argument&) {
    __builtin_trap();  // caught where documented above; escaping here means a new error path
  } catch (...) {
    __builtin_trap();
  }
  return 0;
}
