#include "core/tokenizer/tokenizer.h"

#include "core/tokenizer/bpe.h"
#include "core/tokenizer/byte_unicode.h"
#include "core/tokenizer/pretokenizer.h"
#include "core/tokenizer/special_split.h"
#include "core/tokenizer/spm.h"
#include "core/tokenizer/vocab.h"
#include "core/tokenizer/vocab_loader.h"

namespace ember {
namespace {

constexpr std::string_view kSpmSpace = "\xE2\x96\x81";  // "▁"

void append_spm_escaped(std::string& out, std::string_view text) {
  for (char c : text) {
    if (c == ' ') {
      out += kSpmSpace;
    } else {
      out += c;
    }
  }
}

}  // namespace

Tokenizer::Tokenizer(std::shared_ptr<const Vocab> vocab, std::shared_ptr<const PreTokenizer> pre)
    : vocab_(std::move(vocab)), pre_(std::move(pre)) {}

Tokenizer Tokenizer::from_gguf(const gguf::Metadata& md) { return from_vocab(load_vocab(md)); }

Tokenizer Tokenizer::from_vocab(Vocab vocab) {
  if (vocab.tokens.empty()) throw TokenizerError("vocabulary is empty");
  if (vocab.text_index.empty()) vocab.index();
  std::shared_ptr<const PreTokenizer> pre;
  if (vocab.model == VocabModel::BytePairEncoding) pre = PreTokenizer::for_name(vocab.pre);
  return Tokenizer(std::make_shared<const Vocab>(std::move(vocab)), std::move(pre));
}

int32_t Tokenizer::n_vocab() const { return vocab_->size(); }

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool add_special, bool parse_special) const {
  std::vector<Fragment> fragments;
  split_special(*vocab_, text, parse_special, fragments);
  return encode_fragments(text, fragments, add_special);
}

std::vector<int32_t> Tokenizer::encode_segments(std::span<const TextSegment> segments, bool add_special) const {
  size_t total = 0;
  for (const TextSegment& s : segments) total += s.text.size();  // sizes of strings in memory: no overflow
  std::string joined;
  joined.reserve(total);
  std::vector<Fragment> fragments, pieces;
  for (const TextSegment& s : segments) {
    const size_t base = joined.size();
    joined += s.text;
    if (s.parse_special) {
      split_special(*vocab_, s.text, /*parse_special=*/true, pieces);
    } else {
      // Content is plain text through and through: not even user-defined tokens are cut out of
      // it (plain encode() does cut those, as llama.cpp does), since a vocabulary may type its
      // turn markers user-defined and a user's text must never produce one.
      pieces.assign(1, Fragment{-1, 0, s.text.size()});
    }
    for (Fragment f : pieces) {
      if (f.token >= 0) {
        fragments.push_back(f);
        continue;
      }
      f.offset += base;
      // Raw text continuing raw text of the previous segment is one piece, as in the joined text:
      // SentencePiece merges and the space prefix must not see a seam.
      Fragment* last = fragments.empty() ? nullptr : &fragments.back();
      if (last != nullptr && last->token < 0 && last->offset + last->length == f.offset) {
        last->length += f.length;
      } else {
        fragments.push_back(f);
      }
    }
  }
  return encode_fragments(joined, fragments, add_special);
}

std::vector<int32_t> Tokenizer::encode_fragments(std::string_view text, const std::vector<Fragment>& fragments,
                                                 bool add_special) const {
  std::vector<int32_t> out;
  out.reserve(text.size() / 3 + 4);
  if (add_special && vocab_->add_bos && vocab_->bos >= 0) out.push_back(vocab_->bos);
  bool after_special = true;  // the start of the text counts as following a special token
  for (const Fragment& f : fragments) {
    if (f.token >= 0) {
      out.push_back(f.token);
      after_special = true;
    } else {
      encode_raw(text.substr(f.offset, f.length), after_special, out);
      after_special = false;
    }
  }
  if (add_special && vocab_->add_eos && vocab_->eos >= 0) out.push_back(vocab_->eos);
  return out;
}

void Tokenizer::encode_raw(std::string_view text, bool after_special, std::vector<int32_t>& out) const {
  if (vocab_->model == VocabModel::SentencePiece) {
    std::string escaped;
    escaped.reserve(text.size() + text.size() / 2 + kSpmSpace.size());
    if (vocab_->add_space_prefix && after_special) escaped += kSpmSpace;
    append_spm_escaped(escaped, text);
    spm_tokenize(*vocab_, escaped, out);
    return;
  }
  std::vector<TextSpan> words;
  pre_->split(text, words);
  std::string word;
  BpeScratch scratch;
  for (const TextSpan& w : words) {
    word.clear();
    append_bytes_as_unicode(word, text.substr(w.offset, w.length));
    if (pre_->ignore_merges()) {
      if (const int32_t id = vocab_->find(word); id >= 0) {
        out.push_back(id);
        continue;
      }
    }
    bpe_tokenize_word(*vocab_, word, scratch, out);
  }
}

void Tokenizer::check_id(int32_t id) const {
  if (id < 0 || id >= vocab_->size()) {
    throw TokenizerError("token id " + std::to_string(id) + " is outside the vocabulary of " +
                         std::to_string(vocab_->size()) + " tokens");
  }
}

std::string Tokenizer::token_to_piece(int32_t id, bool render_special) const {
  check_id(id);
  if (render_special && vocab_->type(id) == TokenType::Control) return vocab_->tokens[id];
  return vocab_->piece(id);
}

std::string Tokenizer::decode(std::span<const int32_t> ids, bool render_special) const {
  std::string out;
  for (size_t i = 0; i < ids.size(); ++i) {
    check_id(ids[i]);
    if (render_special && vocab_->type(ids[i]) == TokenType::Control) {
      out += vocab_->tokens[ids[i]];
    } else {
      vocab_->append_piece(out, ids[i]);
    }
    if (i == 0 && strips_first_space() && !out.empty() && out[0] == ' ') out.erase(0, 1);
  }
  return out;
}

int32_t Tokenizer::bos_id() const { return vocab_->bos; }
int32_t Tokenizer::eos_id() const { return vocab_->eos; }
bool Tokenizer::add_bos_by_default() const { return vocab_->add_bos; }
bool Tokenizer::add_eos_by_default() const { return vocab_->add_eos; }

bool Tokenizer::is_end_of_generation(int32_t id) const {
  for (int32_t e : vocab_->end_of_generation) {
    if (e == id) return true;
  }
  return false;
}

bool Tokenizer::is_control(int32_t id) const {
  return id >= 0 && id < vocab_->size() && vocab_->type(id) == TokenType::Control;
}

std::string_view Tokenizer::model_name() const {
  return vocab_->model == VocabModel::SentencePiece ? "llama" : "gpt2";
}

std::optional<int32_t> Tokenizer::find_token(std::string_view text) const {
  const int32_t id = vocab_->find(text);
  if (id < 0) return std::nullopt;
  return id;
}

bool Tokenizer::strips_first_space() const {
  return vocab_->model == VocabModel::SentencePiece && vocab_->add_space_prefix;
}

}  // namespace ember
