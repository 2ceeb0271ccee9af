#include "core/grammar/token_trie.h"

#include <algorithm>
#include <numeric>
#include <stdexcept>

#include "core/tokenizer/tokenizer.h"

namespace ember::grammar {

TokenTrie::TokenTrie(const std::vector<std::string>& pieces, std::vector<int32_t> eog)
    : n_vocab_(static_cast<int32_t>(pieces.size())), pieces_(pieces), eog_(std::move(eog)), eog_flag_(pieces.size(), 0) {
  for (int32_t id : eog_) {
    if (id < 0 || id >= n_vocab_) throw std::invalid_argument("TokenTrie: end-of-generation id out of range");
    eog_flag_[static_cast<size_t>(id)] = 1;
  }
  // Sorted byte strings give the preorder directly: a node's own tokens come before its
  // extensions, and equal strings (a byte token and a normal token with the same byte) sit together.
  std::vector<int32_t> order;
  for (int32_t id = 0; id < n_vocab_; ++id) {
    if (!pieces_[static_cast<size_t>(id)].empty() && !eog_flag_[static_cast<size_t>(id)]) order.push_back(id);
  }
  std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
    return pieces_[static_cast<size_t>(a)] < pieces_[static_cast<size_t>(b)];
  });
  nodes_.push_back({0, 0, 0, 0, 0});
  std::vector<uint32_t> open{0};  // open[d]: the node at depth d on the current path
  const std::string* prev = nullptr;
  for (int32_t id : order) {
    const std::string& p = pieces_[static_cast<size_t>(id)];
    if (p.size() > 0xFFFF) throw std::invalid_argument("TokenTrie: a token longer than 65535 bytes");
    size_t common = 0;
    if (prev != nullptr) {
      while (common < p.size() && common < prev->size() && (*prev)[common] == p[common]) ++common;
    }
    while (open.size() > common + 1) {
      nodes_[open.back()].skip = static_cast<uint32_t>(nodes_.size());
      open.pop_back();
    }
    for (size_t d = common; d < p.size(); ++d) {
      open.push_back(static_cast<uint32_t>(nodes_.size()));
      const auto t = static_cast<uint32_t>(ids_.size());
      nodes_.push_back({0, t, t, static_cast<uint16_t>(d + 1), static_cast<uint8_t>(p[d])});
    }
    Node& end = nodes_[open.back()];
    if (end.tok_begin == end.tok_end) end.tok_begin = end.tok_end = static_cast<uint32_t>(ids_.size());
    ids_.push_back(id);
    end.tok_end = static_cast<uint32_t>(ids_.size());
    max_depth_ = std::max(max_depth_, p.size());
    prev = &p;
  }
  while (!open.empty()) {
    nodes_[open.back()].skip = static_cast<uint32_t>(nodes_.size());
    open.pop_back();
  }
}

std::shared_ptr<const TokenTrie> TokenTrie::from_tokenizer(const Tokenizer& tokenizer) {
  std::vector<std::string> pieces(static_cast<size_t>(tokenizer.n_vocab()));
  std::vector<int32_t> eog;
  for (int32_t id = 0; id < tokenizer.n_vocab(); ++id) {
    pieces[static_cast<size_t>(id)] = tokenizer.token_to_piece(id);
    if (tokenizer.is_end_of_generation(id)) eog.push_back(id);
  }
  return std::make_shared<const TokenTrie>(pieces, std::move(eog));
}

}  // namespace ember::grammar
