#include "core/tokenizer/tokenizer.h"
#include "core/tokenizer/utf8.h"

namespace ember {

IncrementalDetokenizer::IncrementalDetokenizer(const Tokenizer& tok, bool render_special)
    : tok_(&tok), render_special_(render_special) {}

std::string IncrementalDetokenizer::push(int32_t id) {
  const std::string piece = tok_->token_to_piece(id, render_special_);
  // Same first-token rule as Tokenizer::decode, so the stream adds up to decode().
  const bool strip = first_ && tok_->strips_first_space() && !piece.empty() && piece[0] == ' ';
  first_ = false;
  pending_.append(piece, strip ? 1 : 0);
  const size_t held = utf8::incomplete_tail(pending_);
  std::string out;
  utf8::append_sanitized(out, std::string_view(pending_).substr(0, pending_.size() - held));
  pending_.erase(0, pending_.size() - held);
  return out;
}

std::string IncrementalDetokenizer::flush() {
  std::string out;
  utf8::append_sanitized(out, pending_);
  reset();
  return out;
}

void IncrementalDetokenizer::reset() {
  pending_.clear();
  first_ = true;
}

}  // namespace ember
