#pragma once
// Token text -> id, as a flat open-addressing table of ids over the vocabulary's own strings: no
// copy of 150k token texts and no node per token.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace ember {

class TokenIndex {
 public:
  // Indexes tokens[0..n); on duplicate texts the last id wins (as llama.cpp's map assignment does).
  void build(const std::vector<std::string>& tokens);
  // -1 when absent. `tokens` must be the vector build() saw (or an equal one).
  int32_t find(const std::vector<std::string>& tokens, std::string_view text) const;
  bool empty() const { return slots_.empty(); }

 private:
  struct Slot {
    uint32_t hash_low = 0;
    int32_t id = -1;
  };
  std::vector<Slot> slots_;
};

}  // namespace ember
