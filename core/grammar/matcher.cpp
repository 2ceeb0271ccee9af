#include "core/grammar/matcher.h"

#include <limits>
#include <stdexcept>

namespace ember::grammar {

namespace {
constexpr uint32_t kNoState = 0xFFFFFFFFu;
}

Matcher::Matcher(std::shared_ptr<const Grammar> grammar, std::shared_ptr<const TokenTrie> trie,
                 const MatcherLimits& limits)
    : grammar_(std::move(grammar)),
      trie_(std::move(trie)),
      limits_(limits),
      automaton_(grammar_, limits.automaton),
      state_(automaton_.initial()) {
  if (limits_.mask_cache_entries == 0) limits_.mask_cache_entries = 1;
  const size_t words = (static_cast<size_t>(trie_->n_vocab()) + 63) / 64;
  cache_.assign(limits_.mask_cache_entries, std::vector<uint64_t>(words, 0));
  cache_state_.assign(limits_.mask_cache_entries, kNoState);
  walk_states_.assign(trie_->max_depth() + 1, 0);
  finished_mask_.assign(words, 0);
}

void Matcher::reset() {
  state_ = automaton_.initial();
  finished_ = false;
  current_slot_ = -1;
}

uint32_t Matcher::walk(uint32_t from, std::string_view bytes) {
  uint32_t s = from;
  for (char c : bytes) {
    s = automaton_.next(s, static_cast<uint8_t>(c));
    if (s == Automaton::kDead) break;
  }
  return s;
}

bool Matcher::allowed(int32_t token) {
  if (finished_ || token < 0 || token >= trie_->n_vocab()) return false;
  if (current_slot_ >= 0) {
    return (cache_[static_cast<size_t>(current_slot_)][static_cast<size_t>(token) >> 6] >> (token & 63)) & 1;
  }
  if (trie_->is_eog(token)) return automaton_.accepting(state_);
  const std::string& piece = trie_->piece(token);
  return !piece.empty() && walk(state_, piece) != Automaton::kDead;
}

bool Matcher::accept(int32_t token) {
  if (!allowed(token)) return false;
  if (trie_->is_eog(token)) {
    finished_ = true;
    current_slot_ = -1;
    return true;
  }
  state_ = walk(state_, trie_->piece(token));
  after_state_change();
  return true;
}

bool Matcher::accept_bytes(std::string_view bytes) {
  if (finished_) return false;
  const uint32_t s = walk(state_, bytes);
  if (s == Automaton::kDead) return false;
  state_ = s;
  after_state_change();
  return true;
}

void Matcher::after_state_change() {
  current_slot_ = -1;
  for (size_t i = 0; i < cache_state_.size(); ++i) {
    if (cache_state_[i] == state_) {
      current_slot_ = static_cast<int32_t>(i);
      break;
    }
  }
  // A long generation keeps creating states (each nesting depth, each counter value); between
  // tokens is the one safe point to drop them, since no walk holds state ids then.
  if (automaton_.needs_compaction()) {
    state_ = automaton_.compact(state_);
    std::fill(cache_state_.begin(), cache_state_.end(), kNoState);
    current_slot_ = -1;
  }
}

void Matcher::compute_mask(std::vector<uint64_t>& bits) {
  std::fill(bits.begin(), bits.end(), 0);
  const auto nodes = trie_->nodes();
  const auto ids = trie_->ids();
  walk_states_[0] = state_;
  const uint32_t n = static_cast<uint32_t>(nodes.size());
  for (uint32_t i = 1; i < n;) {
    const TokenTrie::Node& node = nodes[i];
    const uint32_t s = automaton_.next(walk_states_[node.depth - 1], node.byte);
    if (s == Automaton::kDead) {
      i = node.skip;
      continue;
    }
    walk_states_[node.depth] = s;
    for (uint32_t t = node.tok_begin; t < node.tok_end; ++t) {
      const auto id = static_cast<uint32_t>(ids[t]);
      bits[id >> 6] |= uint64_t{1} << (id & 63);
    }
    ++i;
  }
  if (automaton_.accepting(state_)) {
    for (int32_t id : trie_->eog()) bits[static_cast<uint32_t>(id) >> 6] |= uint64_t{1} << (id & 63);
  }
}

const std::vector<uint64_t>& Matcher::current_mask() {
  if (finished_) return finished_mask_;
  if (current_slot_ < 0) {
    const size_t slot = cache_next_;
    cache_next_ = (cache_next_ + 1) % cache_.size();
    cache_state_[slot] = kNoState;  // not valid until computed (compute may throw)
    compute_mask(cache_[slot]);
    cache_state_[slot] = state_;
    current_slot_ = static_cast<int32_t>(slot);
  }
  return cache_[static_cast<size_t>(current_slot_)];
}

std::span<const uint64_t> Matcher::allowed_bits() { return current_mask(); }

void Matcher::mask(std::span<float> logits) {
  if (logits.size() != static_cast<size_t>(trie_->n_vocab())) {
    throw std::invalid_argument("Matcher::mask: " + std::to_string(logits.size()) + " logits for a vocabulary of " +
                                std::to_string(trie_->n_vocab()));
  }
  const std::vector<uint64_t>& bits = current_mask();
  constexpr float kBanned = -std::numeric_limits<float>::infinity();
  for (size_t w = 0; w < bits.size(); ++w) {
    const uint64_t word = bits[w];
    if (word == ~uint64_t{0}) continue;
    const size_t base = w * 64;
    const size_t end = std::min(base + 64, logits.size());
    for (size_t i = base; i < end; ++i) {
      if (!((word >> (i - base)) & 1)) logits[i] = kBanned;
    }
  }
}

}  // namespace ember::grammar
