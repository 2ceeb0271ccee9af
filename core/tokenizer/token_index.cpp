#include "core/tokenizer/token_index.h"

#include "core/tokenizer/string_hash.h"

namespace ember {

void TokenIndex::build(const std::vector<std::string>& tokens) {
  slots_.assign(table_capacity(tokens.size()), Slot{});
  const size_t mask = slots_.size() - 1;
  for (int32_t id = 0; id < static_cast<int32_t>(tokens.size()); ++id) {
    const uint64_t h = fnv1a64(tokens[id]);
    size_t i = h & mask;
    while (slots_[i].id >= 0 && !(slots_[i].hash_low == static_cast<uint32_t>(h) && tokens[slots_[i].id] == tokens[id])) {
      i = (i + 1) & mask;
    }
    slots_[i] = {static_cast<uint32_t>(h), id};
  }
}

int32_t TokenIndex::find(const std::vector<std::string>& tokens, std::string_view text) const {
  if (slots_.empty()) return -1;
  const uint64_t h = fnv1a64(text);
  const size_t mask = slots_.size() - 1;
  for (size_t i = h & mask; slots_[i].id >= 0; i = (i + 1) & mask) {
    if (slots_[i].hash_low == static_cast<uint32_t>(h) && tokens[slots_[i].id] == text) return slots_[i].id;
  }
  return -1;
}

}  // namespace ember
