#pragma once
// The regex word splitting that byte-level BPE vocabularies apply before merging, chosen by
// tokenizer.ggml.pre. Expressions apply in sequence, each splitting the pieces the previous one
// made; text between matches stays a piece of its own (llama.cpp's unicode_regex_split).
#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace ember {

struct TextSpan {
  size_t offset = 0;
  size_t length = 0;
};

class PreTokenizer {
 public:
  // Throws TokenizerError naming tokenizer.ggml.pre for a name it does not know.
  static std::shared_ptr<const PreTokenizer> for_name(std::string_view pre);
  // From explicit PCRE2 expressions (tests); throws TokenizerError when one does not compile.
  static std::shared_ptr<const PreTokenizer> from_expressions(std::string name, const std::vector<std::string>& exprs,
                                                              bool ignore_merges = false);

  ~PreTokenizer();
  PreTokenizer(const PreTokenizer&) = delete;
  PreTokenizer& operator=(const PreTokenizer&) = delete;

  // Splits `text` into pieces that cover it exactly, in order; `out` is cleared first.
  void split(std::string_view text, std::vector<TextSpan>& out) const;

  const std::string& name() const { return name_; }
  // llama3-style vocabularies take a whole word as one token when it is one, skipping the merges.
  bool ignore_merges() const { return ignore_merges_; }

 private:
  struct Compiled;
  PreTokenizer() = default;
  std::string name_;
  bool ignore_merges_ = false;
  std::vector<std::unique_ptr<Compiled>> exprs_;
};

}  // namespace ember
