#pragma once
// The per-sequence side of constrained decoding: where the accepted text stands in the grammar,
// which tokens may come next, and advancing on the token the sampler picked.
//
//   auto g = grammar::Grammar::parse(gbnf);                 // once per grammar, shareable
//   auto trie = grammar::TokenTrie::from_tokenizer(tok);    // once per vocabulary, shareable
//   grammar::Matcher m(g, trie);                            // one per sequence
//   loop: m.mask(logits); id = sample(logits); m.accept(id); stop when m.finished()
//
// A mask is computed by walking the token trie against the automaton (automaton.h), pruning each
// subtree as soon as its prefix is dead, and cached by automaton state (a JSON string body, say,
// comes back to the same state over and over). Not thread-safe; cheap to create per request once
// the trie exists.
#include <cstdint>
#include <memory>
#include <span>
#include <string_view>
#include <vector>

#include "core/grammar/automaton.h"
#include "core/grammar/grammar.h"
#include "core/grammar/token_trie.h"

namespace ember::grammar {

struct MatcherLimits {
  AutomatonLimits automaton;
  size_t mask_cache_entries = 64;  // cached masks, n_vocab / 8 bytes each
};

class Matcher {
 public:
  Matcher(std::shared_ptr<const Grammar> grammar, std::shared_ptr<const TokenTrie> trie,
          const MatcherLimits& limits = {});

  // Sets every disallowed token's logit to -inf. logits.size() must be the trie's n_vocab.
  void mask(std::span<float> logits);
  // The allowed set as bits (bit id of word id/64), valid until the next accept()/reset().
  std::span<const uint64_t> allowed_bits();
  // Whether `token` may come next: its bytes continue a valid string, or it ends generation and
  // the text so far is complete. Cheap for one token (walks only its bytes).
  bool allowed(int32_t token);
  // Advances on `token`; false (and no change) when it is not allowed. An end-of-generation token
  // finishes the matcher.
  bool accept(int32_t token);
  // Advances on raw bytes (a prefilled answer prefix, tests); false and no change when rejected.
  bool accept_bytes(std::string_view bytes);

  bool accepting() const { return !finished_ && automaton_.accepting(state_); }  // EOG allowed now
  bool can_continue() const { return !finished_ && automaton_.can_continue(state_); }
  bool finished() const { return finished_; }  // an end-of-generation token was accepted
  void reset();

  const TokenTrie& trie() const { return *trie_; }

 private:
  uint32_t walk(uint32_t from, std::string_view bytes);
  const std::vector<uint64_t>& current_mask();
  void compute_mask(std::vector<uint64_t>& bits);
  void after_state_change();

  std::shared_ptr<const Grammar> grammar_;
  std::shared_ptr<const TokenTrie> trie_;
  MatcherLimits limits_;
  Automaton automaton_;
  uint32_t state_;
  bool finished_ = false;
  // Mask cache: slot i holds the mask of state cache_state_[i]; replaced round-robin.
  std::vector<std::vector<uint64_t>> cache_;
  std::vector<uint32_t> cache_state_;
  size_t cache_next_ = 0;
  int32_t current_slot_ = -1;  // the slot of state_'s mask, once known
  std::vector<uint32_t> walk_states_;  // per trie depth, reused
  std::vector<uint64_t> finished_mask_;
};

}  // namespace ember::grammar
