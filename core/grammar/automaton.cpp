#include "core/grammar/automaton.h"

#include <algorithm>
#include <cstring>

#include "core/grammar/utf8.h"

namespace ember::grammar {
namespace {

constexpr uint32_t kNoPos = 0xFFFFFFFFu;
constexpr uint32_t kMinForLength[] = {0, 0x80, 0x800, 0x10000};

uint64_t pair_key(uint32_t a, uint32_t b) { return (uint64_t{a} << 32) | b; }

}  // namespace

Automaton::Automaton(std::shared_ptr<const Grammar> grammar, const AutomatonLimits& limits)
    : grammar_(std::move(grammar)), limits_(limits) {
  reset_pools();
  build_initial();
}

void Automaton::build_initial() {
  scratch_.clear();
  visited_.clear();
  for (uint32_t start : grammar_->alternatives(grammar_->root())) push(start, 0);
  std::sort(scratch_.begin(), scratch_.end());
  scratch_.erase(std::unique(scratch_.begin(), scratch_.end()), scratch_.end());
  initial_ = scratch_.empty() ? kDead : intern(scratch_, 0, 0, 0);
}

void Automaton::reset_pools() {
  frames_.clear();
  frame_index_.clear();
  states_.clear();
  stack_ids_.clear();
  state_index_.clear();
  rows_ = 0;
  frames_.push_back({kNoPos, 0});  // frame 0: the empty stack, i.e. the root rule is complete
  states_.emplace_back();          // state 0: dead
}

uint32_t Automaton::frame(uint32_t pos, uint32_t parent) {
  const auto [it, inserted] = frame_index_.try_emplace(pair_key(pos, parent), static_cast<uint32_t>(frames_.size()));
  if (inserted) frames_.push_back({pos, parent});
  return it->second;
}

// Expands (pos, parent) until every stack tops on a character: the closure of llama.cpp's
// advance_stack, iterative (stacks can be deep) and with a visited set, so right-recursive cycles
// through empty alternatives end.
void Automaton::push(uint32_t pos, uint32_t parent) {
  work_.clear();
  work_.emplace_back(pos, parent);
  while (!work_.empty()) {
    auto [p, par] = work_.back();
    work_.pop_back();
    if (!visited_.insert(pair_key(p, par)).second) continue;
    if (visited_.size() > limits_.max_closure) {
      throw GrammarError("the grammar state grew past " + std::to_string(limits_.max_closure) +
                         " parse positions (an ambiguous grammar?)");
    }
    const Element& e = grammar_->element(p);
    switch (e.kind) {
      case ElementKind::End:
        if (par == 0) {
          scratch_.push_back(0);  // the empty stack: accepting
        } else {
          work_.emplace_back(frames_[par].pos, frames_[par].parent);
        }
        break;
      case ElementKind::Char:
        scratch_.push_back(frame(p, par));
        break;
      case ElementKind::Rule: {
        // A reference in tail position returns straight to the caller: no frame, so `x*` loops
        // do not deepen the stack.
        const uint32_t cont = grammar_->element(p + 1).kind == ElementKind::End ? par : frame(p + 1, par);
        for (uint32_t start : grammar_->alternatives(e.value)) work_.emplace_back(start, cont);
        break;
      }
    }
  }
}

void Automaton::advance(uint32_t state, uint32_t cp) {
  scratch_.clear();
  visited_.clear();
  const State& s = states_[state];
  // Copy the ids: push() may grow frames_, and intern() states_, but stack_ids_ is stable here.
  for (uint32_t i = 0; i < s.stack_count; ++i) {
    const uint32_t id = stack_ids_[s.stack_begin + i];
    if (id == 0) continue;
    const Frame f = frames_[id];
    if (grammar_->char_set(grammar_->element(f.pos).value).contains(cp)) {
      // push() resets work_ but not visited_: one visited set per advance.
      push(f.pos + 1, f.parent);
    }
  }
  std::sort(scratch_.begin(), scratch_.end());
  scratch_.erase(std::unique(scratch_.begin(), scratch_.end()), scratch_.end());
}

bool Automaton::feasible(uint32_t state, uint32_t lo, uint32_t hi) const {
  // Surrogates (U+D800..U+DFFF) are not code points UTF-8 may encode: a prefix such as ED A4 that
  // can only become one must be dead now, or a token could strand the text where nothing completes it.
  if (lo <= 0xDFFF && hi >= 0xD800) {
    return (lo < 0xD800 && feasible(state, lo, 0xD7FF)) || (hi > 0xDFFF && feasible(state, 0xE000, hi));
  }
  const State& s = states_[state];
  for (uint32_t i = 0; i < s.stack_count; ++i) {
    const uint32_t id = stack_ids_[s.stack_begin + i];
    if (id != 0 && grammar_->char_set(grammar_->element(frames_[id].pos).value).intersects(lo, hi)) return true;
  }
  return false;
}

uint32_t Automaton::intern(const std::vector<uint32_t>& stacks, uint32_t partial, uint8_t left, uint8_t len) {
  key_.assign(reinterpret_cast<const char*>(stacks.data()), stacks.size() * sizeof(uint32_t));
  key_.append(reinterpret_cast<const char*>(&partial), sizeof partial);
  key_ += static_cast<char>(left);
  key_ += static_cast<char>(len);
  const auto [it, inserted] = state_index_.try_emplace(key_, static_cast<uint32_t>(states_.size()));
  if (!inserted) return it->second;
  State s;
  s.stack_begin = static_cast<uint32_t>(stack_ids_.size());
  s.stack_count = static_cast<uint32_t>(stacks.size());
  s.partial = partial;
  s.partial_left = left;
  s.partial_len = len;
  s.accepting = left == 0 && !stacks.empty() && stacks.front() == 0;
  stack_ids_.insert(stack_ids_.end(), stacks.begin(), stacks.end());
  states_.push_back(std::move(s));
  return it->second;
}

uint32_t Automaton::compute(uint32_t state, uint8_t byte) {
  if (state == kDead) return kDead;
  const State& s = states_[state];
  if (s.partial_left == 0) {
    const int n = utf8_continuations(byte);
    if (n < 0) return kDead;
    if (n == 0) {
      advance(state, byte);
      return scratch_.empty() ? kDead : intern(scratch_, 0, 0, 0);
    }
    const uint32_t bits = byte & (0x3Fu >> n);
    const uint32_t lo = std::max(bits << (6 * n), kMinForLength[n]);
    const uint32_t hi = std::min(((bits + 1) << (6 * n)) - 1, kMaxCodePoint);
    if (lo > hi || !feasible(state, lo, hi)) return kDead;
    std::vector<uint32_t> stacks(stack_ids_.begin() + s.stack_begin, stack_ids_.begin() + s.stack_begin + s.stack_count);
    return intern(stacks, bits, static_cast<uint8_t>(n), static_cast<uint8_t>(n));
  }
  if ((byte & 0xC0) != 0x80) return kDead;
  const uint32_t bits = (s.partial << 6) | (byte & 0x3F);
  const int left = s.partial_left - 1;
  const int len = s.partial_len;
  if (left == 0) {
    if (bits < kMinForLength[len] || bits > kMaxCodePoint || (bits >= 0xD800 && bits <= 0xDFFF)) return kDead;
    advance(state, bits);
    return scratch_.empty() ? kDead : intern(scratch_, 0, 0, 0);
  }
  const uint32_t lo = std::max(bits << (6 * left), kMinForLength[len]);
  const uint32_t hi = std::min(((bits + 1) << (6 * left)) - 1, kMaxCodePoint);
  if (lo > hi || !feasible(state, lo, hi)) return kDead;
  std::vector<uint32_t> stacks(stack_ids_.begin() + s.stack_begin, stack_ids_.begin() + s.stack_begin + s.stack_count);
  return intern(stacks, bits, static_cast<uint8_t>(left), static_cast<uint8_t>(len));
}

uint32_t Automaton::next_slow(uint32_t state, uint8_t byte) {
  const uint32_t to = compute(state, byte);
  State& s = states_[state];  // compute() may have grown states_: look it up again
  if (!s.row && rows_ < limits_.max_rows) {
    s.row.reset(new int32_t[256]);
    std::memset(s.row.get(), 0xFF, 256 * sizeof(int32_t));
    ++rows_;
  }
  if (s.row) s.row[byte] = static_cast<int32_t>(to);
  return to;
}

uint32_t Automaton::import_frame(const std::vector<Frame>& old, uint32_t id) {
  if (id == 0) return 0;
  // Frames form chains towards 0; import the chain bottom-up without recursion.
  std::vector<uint32_t> chain;
  for (uint32_t f = id; f != 0; f = old[f].parent) chain.push_back(f);
  uint32_t parent = 0;
  for (auto it = chain.rbegin(); it != chain.rend(); ++it) parent = frame(old[*it].pos, parent);
  return parent;
}

uint32_t Automaton::compact(uint32_t keep) {
  if (keep == kDead) {
    reset_pools();
    build_initial();
    return kDead;
  }
  const State& s = states_[keep];
  std::vector<uint32_t> stacks(stack_ids_.begin() + s.stack_begin, stack_ids_.begin() + s.stack_begin + s.stack_count);
  const uint32_t partial = s.partial;
  const uint8_t left = s.partial_left, len = s.partial_len;
  const std::vector<Frame> old = std::move(frames_);
  reset_pools();
  for (uint32_t& id : stacks) id = import_frame(old, id);
  std::sort(stacks.begin(), stacks.end());
  const uint32_t kept = intern(stacks, partial, left, len);
  build_initial();
  return kept;
}

}  // namespace ember::grammar
