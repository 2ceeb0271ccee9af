#pragma once
// A grammar run as a lazily built deterministic automaton over bytes.
//
// A parse position is a set of pushdown stacks (as in llama.cpp's matcher): each stack is a chain
// of frames, a frame being a position in Grammar::elements(); the top frame always sits on a
// character element. Frames are hash-consed into a pool, so equal stacks are one id, and a set of
// stack ids (plus a partially read UTF-8 sequence) is interned as a state. The transition
// state x byte -> state is computed once and cached in a 256-entry row per state: walking a token
// trie is then one array load per trie edge in the steady state, with no allocation.
//
// Mutable cache over an immutable Grammar: one per Matcher (not shared between threads).
#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "core/grammar/grammar.h"

namespace ember::grammar {

struct AutomatonLimits {
  size_t max_closure = 100000;   // frames visited to advance one code point, before an error
  size_t max_states = 50000;     // above this, compact() is due
  size_t max_frames = 2000000;   // hash-consed frames, likewise
  size_t max_rows = 16384;       // cached transition rows, 1 KiB each; past it, uncached (slower)
};

class Automaton {
 public:
  static constexpr uint32_t kDead = 0;  // the state with no stacks; every byte leads back to it

  explicit Automaton(std::shared_ptr<const Grammar> grammar, const AutomatonLimits& limits = {});

  uint32_t initial() const { return initial_; }
  // The state after one more byte; kDead when no string of the grammar continues that way.
  // Throws GrammarError when a grammar state outgrows max_closure.
  uint32_t next(uint32_t state, uint8_t byte) {
    const int32_t* row = states_[state].row.get();
    if (row != nullptr && row[byte] >= 0) return static_cast<uint32_t>(row[byte]);
    return next_slow(state, byte);
  }
  // Whether the text so far is a complete string of the grammar.
  bool accepting(uint32_t state) const { return states_[state].accepting; }
  // Whether some non-empty continuation may follow.
  bool can_continue(uint32_t state) const { return states_[state].stack_count > (states_[state].accepting ? 1u : 0u); }

  // True when the caches have grown past their limits and compact() should run.
  bool needs_compaction() const { return states_.size() > limits_.max_states || frames_.size() > limits_.max_frames; }
  // Drops every cached state and frame but `keep`; returns keep's new id. Ids held elsewhere
  // (mask caches) are invalid afterwards.
  uint32_t compact(uint32_t keep);

  size_t state_count() const { return states_.size(); }
  const Grammar& grammar() const { return *grammar_; }

 private:
  struct Frame {
    uint32_t pos;     // element position; kNoPos for the empty-stack sentinel (frame 0)
    uint32_t parent;  // the frame beneath; 0 when none
  };
  struct State {
    uint32_t stack_begin = 0;  // into stack_ids_
    uint32_t stack_count = 0;
    uint32_t partial = 0;       // bits of a partial UTF-8 sequence read so far
    uint8_t partial_left = 0;   // continuation bytes still expected; 0 when none is pending
    uint8_t partial_len = 0;    // continuation bytes of the whole pending sequence
    bool accepting = false;
    std::unique_ptr<int32_t[]> row;  // byte -> next state, -1 until computed; null until needed
  };

  uint32_t next_slow(uint32_t state, uint8_t byte);
  uint32_t compute(uint32_t state, uint8_t byte);
  uint32_t frame(uint32_t pos, uint32_t parent);
  void push(uint32_t pos, uint32_t parent);
  void advance(uint32_t state, uint32_t cp);  // fills scratch_ with the stacks after cp
  bool feasible(uint32_t state, uint32_t lo, uint32_t hi) const;
  uint32_t intern(const std::vector<uint32_t>& stacks, uint32_t partial, uint8_t left, uint8_t len);
  void reset_pools();
  void build_initial();
  uint32_t import_frame(const std::vector<Frame>& old, uint32_t id);

  std::shared_ptr<const Grammar> grammar_;
  AutomatonLimits limits_;
  std::vector<Frame> frames_;
  std::unordered_map<uint64_t, uint32_t> frame_index_;
  std::vector<State> states_;
  std::vector<uint32_t> stack_ids_;
  std::unordered_map<std::string, uint32_t> state_index_;
  size_t rows_ = 0;
  uint32_t initial_ = 0;
  // Scratch of advance(), kept to reuse their memory.
  std::vector<uint32_t> scratch_;
  std::vector<std::pair<uint32_t, uint32_t>> work_;
  std::unordered_set<uint64_t> visited_;
  std::string key_;
};

}  // namespace ember::grammar
