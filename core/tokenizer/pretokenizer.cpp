#define PCRE2_CODE_UNIT_WIDTH 8
#include "core/tokenizer/pretokenizer.h"

#include <pcre2.h>

#include "core/tokenizer/tokenizer.h"
#include "core/tokenizer/utf8.h"

namespace ember {
namespace {

// The expressions per pre-tokenizer, as the models' tokenizer.json define them (llama.cpp lists the
// same, adapted where its regex engine needed it). PCRE2 syntax; non-ASCII as \x{...} escapes.
constexpr const char* kGpt2 = R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S))";
constexpr const char* kLlama3 =
    R"((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr const char* kQwen2 =
    R"((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr const char* kCjk = R"([\x{4E00}-\x{9FA5}\x{800}-\x{4E00}\x{AC00}-\x{D7FF}]+)";
// Cased letters of the scripts DeepSeek-LLM's tokenizer lists explicitly.
constexpr const char* kDeepseekLlmLetters =
    R"(\s?[)"
    R"(\x{41}-\x{5A}\x{61}-\x{7A}\x{B5}\x{C0}-\x{D6}\x{D8}-\x{F6}\x{F8}-\x{1BA}\x{1BC}-\x{1BF})"
    R"(\x{1C4}-\x{293}\x{295}-\x{2AF}\x{370}-\x{373}\x{376}\x{377}\x{37B}-\x{37D}\x{37F}\x{386})"
    R"(\x{388}-\x{38A}\x{38C}\x{38E}-\x{3A1}\x{3A3}-\x{3F5}\x{3F7}-\x{481}\x{48A}-\x{52F})"
    R"(\x{531}-\x{556}\x{10A0}-\x{10C5}\x{13A0}-\x{13F5}\x{13F8}-\x{13FD}\x{1C90}-\x{1CBA})"
    R"(\x{1CBD}-\x{1CBF}\x{1D00}-\x{1D2B}\x{1D6B}-\x{1D77}\x{1D79}-\x{1D9A}\x{1E00}-\x{1F15})"
    R"(\x{1F18}-\x{1F1D}\x{1F20}-\x{1F45}\x{1F48}-\x{1F4D}\x{1F50}-\x{1F57}\x{1F59}\x{1F5B}\x{1F5D})"
    R"(\x{1F5F}-\x{1F7D}\x{1F80}-\x{1FB4}\x{1FB6}-\x{1FBC}\x{1FBE}\x{1FC2}-\x{1FC4}\x{1FC6}-\x{1FCC})"
    R"(\x{1FD0}-\x{1FD3}\x{1FD6}-\x{1FDB}\x{1FE0}-\x{1FEC}\x{1FF2}-\x{1FF4}\x{1FF6}-\x{1FFC}\x{2102})"
    R"(\x{2107}\x{210A}-\x{2113}\x{2115}\x{2119}-\x{211D}\x{2124}\x{2126}\x{2128}\x{212A}-\x{212D})"
    R"(\x{212F}-\x{2134}\x{2139}\x{213C}-\x{213F}\x{2145}-\x{2149}\x{214E}\x{2183}\x{2184})"
    R"(\x{2C00}-\x{2C7B}\x{2C7E}-\x{2CE4}\x{2CEB}-\x{2CEE}\x{2CF2}\x{2CF3}\x{A640}-\x{A66D})"
    R"(\x{A680}-\x{A69B}\x{A722}-\x{A76F}\x{A771}-\x{A787}\x{A78B}-\x{A78E}\x{AB70}-\x{ABBF})"
    R"(\x{FB00}-\x{FB06}\x{FB13}-\x{FB17}\x{FF21}-\x{FF3A}\x{FF41}-\x{FF5A}\x{10400}-\x{1044F})"
    R"(\x{104B0}-\x{104D3}\x{104D8}-\x{104FB}\x{10C80}-\x{10CB2}\x{10CC0}-\x{10CF2}\x{118A0}-\x{118DF})"
    R"(\x{1E900}-\x{1E943})"
    R"(]+)";

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
    r.exprs = {R"([\r\n])", kDeepseekLlmLetters, R"(\s?[!-/:-~\x{FF01}-\x{FF0F}\x{FF1A}-\x{FF5E}\x{2018}-\x{201F}\x{3000}-\x{3002}]+)", R"(\s+$)", kCjk, R"(\p{N}+)"};
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
      if (piece.length == 1 && static_cast<unsigned char>(text[piece.offset]) >= 0x80) {
        next.push_back(piece);  // an invalid byte: PCRE2 must not see it (matching assumes valid UTF-8)
        continue;
      }
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
