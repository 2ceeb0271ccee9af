#define PCRE2_CODE_UNIT_WIDTH 8
#include "core/tokenizer/pretokenizer.h"

#include <pcre2.h>

#include "core/tokenizer/tokenizer.h"
#include "core/tokenizer/utf8.h"

namespace ember {
namespace {

// The expressions per pre-tokenizer, as the models' tokenizer.json define them (llama.cpp lists the
// same, adapted where its regex engine needed it). PCRE2 syntax; literal characters are UTF-8.
constexpr const char* kGpt2 = R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S))";
constexpr const char* kLlama3 =
    R"((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr const char* kQwen2 =
    R"((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr const char* kCjk = R"([一-龥ࠀ-一가-퟿]+)";
// Cased letters of the scripts DeepSeek-LLM's tokenizer lists explicitly.
constexpr const char* kDeepseekLlmLetters =
    R"(\s?[A-Za-zµÀ-ÖØ-öø-ƺƼ-ƿǄ-ʓʕ-ʯͰ-ͳͶͷͻ-ͽͿΆΈ-ΊΌΎ-ΡΣ-ϵϷ-ҁҊ-ԯԱ-ՖႠ-ჅᎠ-Ᏽᏸ-ᏽᲐ-ᲺᲽ-Ჿᴀ-ᴫᵫ-ᵷᵹ-ᶚḀ-ἕἘ-Ἕἠ-ὅὈ-Ὅὐ-ὗὙὛὝὟ-ώᾀ-ᾴᾶ-ᾼιῂ-ῄῆ-ῌῐ-ΐῖ-Ίῠ-Ῥῲ-ῴῶ-ῼℂℇℊ-ℓℕℙ-ℝℤΩℨK-ℭℯ-ℴℹℼ-ℿⅅ-ⅉⅎↃↄⰀ-ⱻⱾ-ⳤⳫ-ⳮⳲⳳꙀ-ꙭꚀ-ꚛꜢ-ꝯꝱ-ꞇꞋ-ꞎꭰ-ꮿﬀ-ﬆﬓ-ﬗＡ-Ｚａ-ｚ𐐀-𐑏𐒰-𐓓𐓘-𐓻𐲀-𐲲𐳀-𐳲𑢠-𑣟𞤀-𞥃]+)";

struct Recipe {
  std::vector<std::string> exprs;
  bool ignore_merges = false;
};

bool recipe_for(std::string_view pre, Recipe& r) {
  if (pre == "default") {
    r.exprs = {R"([\p{P}\$\+<=>\^~\|]+)", kGpt2, R"(\p{N}+)", "[0-9][0-9][0-9]"};
  } else if (pre == "gpt-2" || pre == "mpt" || pre == "olmo" || pre == "jais" || pre == "phi-2" ||
             pre == "jina-es" || pre == "jina-de" || pre == "jina-v2-es" || pre == "jina-v2-de" ||
             pre == "jina-v1-en" || pre == "jina-v2-code" || pre == "roberta-bpe") {
    r.exprs = {kGpt2};
  } else if (pre == "llama3" || pre == "llama-bpe" || pre == "llama-v3" || pre == "dbrx" || pre == "smaug-bpe" ||
             pre == "falcon3" || pre == "pixtral") {
    r.exprs = {kLlama3};
    r.ignore_merges = true;
  } else if (pre == "qwen2" || pre == "stablelm2" || pre == "deepseek-r1-qwen" || pre == "megrez") {
    r.exprs = {kQwen2};
  } else if (pre == "falcon") {
    r.exprs = {R"([\p{P}\$\+<=>\^~\|`]+)", kGpt2, "[0-9][0-9][0-9]"};
  } else if (pre == "starcoder" || pre == "refact" || pre == "command-r" || pre == "smollm" ||
             pre == "codeshell" || pre == "exaone" || pre == "minerva-7b") {
    r.exprs = {R"(\p{N})", kGpt2};
  } else if (pre == "deepseek-coder") {
    r.exprs = {R"([\r\n])", R"(\s?\p{L}+)", R"(\s?\p{P}+)", kCjk, R"(\p{N})"};
  } else if (pre == "deepseek-llm") {
    r.exprs = {R"([\r\n])", kDeepseekLlmLetters, R"(\s?[!-/:-~！-／：-～‘-‟　-。]+)", R"(\s+$)", kCjk, R"(\p{N}+)"};
  } else {
    return false;
  }
  return true;
}

void append_pieces_of_valid_runs(std::string_view text, std::vector<TextSpan>& out) {
  // PCRE2 in UTF mode refuses invalid UTF-8, so every invalid byte becomes a piece of its own and the
  // expressions only see valid runs.
  size_t run_start = 0, pos = 0;
  while (pos < text.size()) {
    size_t len = 0;
    if (utf8::decode_at(text, pos, len) == 0xFFFFFFFF) {
      if (pos > run_start) out.push_back({run_start, pos - run_start});
      out.push_back({pos, 1});
      run_start = pos + 1;
    }
    pos += len;
  }
  if (pos > run_start) out.push_back({run_start, pos - run_start});
}

}  // namespace

struct PreTokenizer::Compiled {
  pcre2_code* code = nullptr;
  ~Compiled() { pcre2_code_free(code); }
};

PreTokenizer::~PreTokenizer() = default;

std::shared_ptr<const PreTokenizer> PreTokenizer::for_name(std::string_view pre) {
  Recipe r;
  if (!recipe_for(pre, r)) {
    throw TokenizerError("tokenizer.ggml.pre: unknown pre-tokenizer '" + std::string(pre) + "'");
  }
  return from_expressions(std::string(pre), r.exprs, r.ignore_merges);
}

std::shared_ptr<const PreTokenizer> PreTokenizer::from_expressions(std::string name,
                                                                   const std::vector<std::string>& exprs,
                                                                   bool ignore_merges) {
  std::shared_ptr<PreTokenizer> p(new PreTokenizer());
  p->name_ = std::move(name);
  p->ignore_merges_ = ignore_merges;
  for (const std::string& e : exprs) {
    int error = 0;
    PCRE2_SIZE error_offset = 0;
    auto c = std::make_unique<Compiled>();
    c->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(e.data()), e.size(),
                            PCRE2_UTF | PCRE2_UCP | PCRE2_DOLLAR_ENDONLY, &error, &error_offset, nullptr);
    if (c->code == nullptr) {
      PCRE2_UCHAR msg[256];
      pcre2_get_error_message(error, msg, sizeof msg);
      throw TokenizerError("pre-tokenizer '" + p->name_ + "': expression does not compile at offset " +
                           std::to_string(error_offset) + ": " + reinterpret_cast<const char*>(msg));
    }
    pcre2_jit_compile(c->code, PCRE2_JIT_COMPLETE);  // an interpreter fallback is fine when JIT is absent
    p->exprs_.push_back(std::move(c));
  }
  return p;
}

void PreTokenizer::split(std::string_view text, std::vector<TextSpan>& out) const {
  out.clear();
  append_pieces_of_valid_runs(text, out);
  std::vector<TextSpan> next;
  for (const auto& expr : exprs_) {
    std::unique_ptr<pcre2_match_data, decltype(&pcre2_match_data_free)> md(
        pcre2_match_data_create_from_pattern(expr->code, nullptr), &pcre2_match_data_free);
    if (!md) throw TokenizerError("pre-tokenizer '" + name_ + "': out of memory for match data");
    next.clear();
    for (const TextSpan& piece : out) {
      const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data() + piece.offset);
      size_t kept = 0;    // end of what has been emitted
      size_t search = 0;  // where the next match may start
      while (search < piece.length) {
        const int rc = pcre2_match(expr->code, subject, piece.length, search, PCRE2_NO_UTF_CHECK, md.get(), nullptr);
        if (rc == PCRE2_ERROR_NOMATCH) break;
        if (rc < 0) throw TokenizerError("pre-tokenizer '" + name_ + "': match failed with PCRE2 error " + std::to_string(rc));
        const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md.get());
        const size_t start = ov[0], end = ov[1];
        if (end == start) {  // no expression here matches empty text, but never loop on one that does
          search = start + utf8::sequence_length(static_cast<unsigned char>(text[piece.offset + start]));
          continue;
        }
        if (start > kept) next.push_back({piece.offset + kept, start - kept});
        next.push_back({piece.offset + start, end - start});
        kept = search = end;
      }
      if (kept < piece.length) next.push_back({piece.offset + kept, piece.length - kept});
    }
    out.swap(next);
  }
}

}  // namespace ember
