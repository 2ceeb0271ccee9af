// libFuzzer target for the tokenizers: any input text must tokenize, with and without
// parse_special, into ids inside the vocabulary, and detokenize without throwing; where the
// round trip is exact by design it must hold:
//   byte-level BPE: decode(encode(x)) == x for valid UTF-8 (every byte has a token), and
//                   decode(encode(x, parse_special), render_special) == x;
//   SentencePiece:  decode(encode(x)) == x for valid UTF-8 without "▁" or special-token texts
//                   (those decode to a space, or get a space prefix after them, as in llama.cpp);
//   streaming (IncrementalDetokenizer) gives decode() whenever decode() is valid UTF-8.
// A crash, hang, sanitizer report, exception or broken property is a bug (__builtin_trap).
// The vocabularies are small and built in memory once, so the target needs no fixtures.
// Build: cmake -DEMBER_FUZZ=ON (clang) builds fuzz/fuzz_tokenizer; seeds in tests/fuzz/corpus/tokenizer.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/tokenizer/byte_unicode.h"
#include "core/tokenizer/tokenizer.h"
#include "core/tokenizer/utf8.h"
#include "tests/tokenizer/metadata_builder.h"

namespace {

using ember::Tokenizer;
using namespace ember::test;

constexpr std::string_view kSpmSpace = "\xE2\x96\x81";  // "▁"

// Special-token texts both vocabularies carry: control ("<s>", "</s>", "<|im_start|>", and
// "<|im_end|>" / "<|endoftext|>" made control by the loader) and user-defined ("<|user|>").
const std::vector<std::string> kSpecialTexts = {"<unk>", "<s>", "</s>", "<|im_start|>", "<|im_end|>",
                                                "<|endoftext|>", "<|user|>"};

void add_token(VocabSpec& v, const std::string& text, double score, int64_t type) {
  v.tokens.push_back(text);
  v.scores.push_back(score);
  v.types.push_back(type);
}

Tokenizer make_spm() {
  VocabSpec v = small_spm_vocab({{"▁", -1}, {"▁a", -2}, {"▁t", -3}, {"he", -4}, {"▁the", -5}, {"▁▁", -6},
                                 {"in", -7}, {"ing", -8}, {"é", -9}, {"😀", -10}, {"\n", -11}});
  for (const char* special : {"<|im_start|>", "<|im_end|>", "<|endoftext|>"}) add_token(v, special, 0, 3);
  add_token(v, "<|user|>", 0, 4);
  return Tokenizer::from_gguf(spm_metadata(v));
}

Tokenizer make_bpe(const std::string& pre) {
  std::vector<std::string> tokens;
  for (int b = 0; b < 256; ++b) tokens.emplace_back(ember::byte_to_unicode(static_cast<unsigned char>(b)));
  for (const char* merged : {"Ġt", "he", "Ġthe", "in", "ing", "Ġa", "ĠĠ", "ÃĢ"}) tokens.emplace_back(merged);
  std::vector<int64_t> types(tokens.size(), 1);
  for (const char* special : {"<|endoftext|>", "<|im_start|>", "<|im_end|>", "<s>", "</s>"}) {
    tokens.emplace_back(special);
    types.push_back(3);
  }
  tokens.emplace_back("<|user|>");
  types.push_back(4);
  ember::gguf::Metadata md;
  md.add("tokenizer.ggml.model", string_value("gpt2"));
  md.add("tokenizer.ggml.pre", string_value(pre));
  md.add("tokenizer.ggml.tokens", string_array(tokens));
  md.add("tokenizer.ggml.token_type", int_array(types));
  md.add("tokenizer.ggml.merges", string_array({"Ġ t", "h e", "Ġt he", "i n", "in g", "Ġ a", "Ġ Ġ", "Ã Ģ"}));
  md.add("tokenizer.ggml.bos_token_id", uint32_value(256 + 8 + 3));  // "<s>"
  md.add("tokenizer.ggml.eos_token_id", uint32_value(256 + 8));      // "<|endoftext|>"
  return Tokenizer::from_gguf(md);
}

struct Tokenizers {
  Tokenizer spm = make_spm();
  // Pre-tokenizers with different expression sets: GPT-2's, Llama 3's (ignore_merges), the
  // many-expression DeepSeek ones and llama.cpp's "default".
  std::vector<Tokenizer> bpe = {make_bpe("gpt-2"), make_bpe("llama3"), make_bpe("deepseek-coder"),
                                make_bpe("deepseek-llm"), make_bpe("qwen2"), make_bpe("default")};
};

const Tokenizers& tokenizers() {
  static const Tokenizers t;
  return t;
}

void require(bool ok) {
  if (!ok) __builtin_trap();
}

bool is_valid_utf8(std::string_view s) {
  std::string sanitized;
  ember::utf8::append_sanitized(sanitized, s);
  return sanitized == s;
}

bool contains_any(std::string_view text, const std::vector<std::string>& needles) {
  for (const auto& n : needles) {
    if (text.find(n) != std::string_view::npos) return true;
  }
  return false;
}

std::vector<int32_t> checked_encode(const Tokenizer& tok, std::string_view text, bool add_special,
                                    bool parse_special) {
  std::vector<int32_t> ids = tok.encode(text, add_special, parse_special);
  for (int32_t id : ids) require(id >= 0 && id < tok.n_vocab());
  return ids;
}

void check_streaming(const Tokenizer& tok, const std::vector<int32_t>& ids) {
  const std::string decoded = tok.decode(ids);
  ember::IncrementalDetokenizer detok(tok);
  std::string streamed;
  for (int32_t id : ids) streamed += detok.push(id);
  streamed += detok.flush();
  require(is_valid_utf8(streamed));  // the streaming side never emits broken UTF-8
  if (is_valid_utf8(decoded)) require(streamed == decoded);
}

void check_common(const Tokenizer& tok, std::string_view text) {
  for (bool parse_special : {false, true}) {
    const auto ids = checked_encode(tok, text, /*add_special=*/false, parse_special);
    (void)tok.decode(ids, /*render_special=*/true);
    check_streaming(tok, ids);
  }
  const auto with_bos = checked_encode(tok, text, /*add_special=*/true, /*parse_special=*/false);
  require(!tok.add_bos_by_default() || (!with_bos.empty() && with_bos.front() == tok.bos_id()));
  // Segments (chat prompts: template text special, content plain) obey the same bounds, and a
  // single parse_special segment is encode() itself.
  const size_t half = text.size() / 2;
  const ember::TextSegment segments[] = {{text.substr(0, half), true}, {text.substr(half), false}};
  for (int32_t id : tok.encode_segments(segments, true)) require(id >= 0 && id < tok.n_vocab());
  const ember::TextSegment whole[] = {{text, true}};
  require(tok.encode_segments(whole, false) == tok.encode(text, false, true));
}

void check_bpe_round_trip(const Tokenizer& tok, std::string_view text) {
  if (!is_valid_utf8(text)) return;
  require(tok.decode(checked_encode(tok, text, false, false)) == text);
  require(tok.decode(checked_encode(tok, text, false, true), /*render_special=*/true) == text);
}

void check_spm_round_trip(const Tokenizer& tok, std::string_view text) {
  if (!is_valid_utf8(text) || text.find(kSpmSpace) != std::string_view::npos) return;
  if (contains_any(text, kSpecialTexts)) return;
  require(tok.decode(checked_encode(tok, text, false, false)) == text);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const Tokenizers& t = tokenizers();
  try {
    check_common(t.spm, text);
    check_spm_round_trip(t.spm, text);
    for (const Tokenizer& bpe : t.bpe) {
      check_common(bpe, text);
      check_bpe_round_trip(bpe, text);
    }
  } catch (...) {
    // Valid ids and any text must never throw: TokenizerError here is a bug too.
    __builtin_trap();
  }
  return 0;
}
