#pragma once
// Text <-> token ids for GGUF vocabularies: SentencePiece-style ("llama") and byte-level BPE ("gpt2"),
// matching llama.cpp's tokenization, plus a streaming detokenizer that only emits whole UTF-8 text.
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "core/gguf/gguf_value.h"

namespace ember {

// Bad vocabulary metadata (the message names the key) or an id outside the vocabulary.
class TokenizerError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct Vocab;
class PreTokenizer;
struct Fragment;

// A piece of a prompt with its own rule for special-token texts (see Tokenizer::encode_segments).
struct TextSegment {
  std::string_view text;
  bool parse_special = false;
};

// Immutable once built: copies are cheap (they share the vocabulary) and every member function may
// be called from several threads at once.
class Tokenizer {
 public:
  // Reads tokenizer.ggml.*; throws TokenizerError naming the key on missing or malformed input.
  static Tokenizer from_gguf(const gguf::Metadata& md);
  // From an already validated in-memory vocabulary (tests, tools).
  static Tokenizer from_vocab(Vocab vocab);

  int32_t n_vocab() const;

  // add_special: prepend BOS / append EOS as the metadata says (tokenizer.ggml.add_bos_token,
  // add_eos_token). parse_special: control-token texts such as "<s>" in `text` become those tokens;
  // user-defined tokens are always matched whole, as llama.cpp does.
  std::vector<int32_t> encode(std::string_view text, bool add_special, bool parse_special) const;
  // encode() of the segments' concatenation, where each segment has its own rule: a chat prompt's
  // template markers (parse_special) are special tokens; its message content (!parse_special) is
  // plain text through and through, no special-token text in it becomes a token, user-defined ones
  // included (else a user could write "</s>" or a turn marker and end the turn). Raw text on both
  // sides of a segment boundary is tokenized as one piece, so when only parse_special segments hold
  // special-token texts the ids equal encode(concatenation, add_special, true).
  std::vector<int32_t> encode_segments(std::span<const TextSegment> segments, bool add_special) const;

  // The bytes of one token; control tokens give "" unless render_special. Throws TokenizerError on
  // an id outside [0, n_vocab).
  std::string token_to_piece(int32_t id, bool render_special = false) const;
  // Concatenated pieces; for SentencePiece vocabularies with a space prefix, the first token's
  // leading space is dropped (as llama.cpp's detokenize does).
  std::string decode(std::span<const int32_t> ids, bool render_special = false) const;

  // -1 when absent. SentencePiece vocabularies without the keys get llama.cpp's defaults (1, 2).
  int32_t bos_id() const;
  int32_t eos_id() const;
  bool add_bos_by_default() const;
  bool add_eos_by_default() const;
  bool is_end_of_generation(int32_t id) const;  // eos, eot, eom
  bool is_control(int32_t id) const;
  std::string_view model_name() const;  // "llama" | "gpt2"
  std::optional<int32_t> find_token(std::string_view text) const;

  // True when decode() drops one leading space of the first token's piece.
  bool strips_first_space() const;

 private:
  Tokenizer(std::shared_ptr<const Vocab> vocab, std::shared_ptr<const PreTokenizer> pre);
  std::vector<int32_t> encode_fragments(std::string_view text, const std::vector<Fragment>& fragments,
                                        bool add_special) const;
  void encode_raw(std::string_view text, bool after_special, std::vector<int32_t>& out) const;
  void check_id(int32_t id) const;

  std::shared_ptr<const Vocab> vocab_;       // immutable once built, so copies share it
  std::shared_ptr<const PreTokenizer> pre_;  // null for SentencePiece vocabularies
};

// Streams text token by token without ever emitting a partial UTF-8 sequence: an incomplete tail is
// held back until the next token completes it; bytes that can never form valid UTF-8 become U+FFFD.
// For ids whose decode() is valid UTF-8, the concatenation of push()es and flush() equals decode().
class IncrementalDetokenizer {
 public:
  // `tok` must outlive the detokenizer.
  explicit IncrementalDetokenizer(const Tokenizer& tok, bool render_special = false);
  std::string push(int32_t id);  // the newly complete text (may be empty)
  std::string flush();           // what is held back, invalid bytes as U+FFFD; then resets
  void reset();

 private:
  const Tokenizer* tok_;
  bool render_special_;
  bool first_ = true;
  std::string pending_;
};

}  // namespace ember
