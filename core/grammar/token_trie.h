#pragma once
// A vocabulary's token byte strings as a trie, laid out in depth-first preorder so a mask walk is a
// single forward loop: each node records where its subtree ends, and a dead grammar state skips the
// whole subtree at once. Built once per vocabulary and shared (immutable) by every Matcher.
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace ember {
class Tokenizer;
}

namespace ember::grammar {

class TokenTrie {
 public:
  struct Node {
    uint32_t skip;       // index of the first node after this node's subtree
    uint32_t tok_begin;  // tokens whose bytes end here: ids()[tok_begin, tok_end)
    uint32_t tok_end;
    uint16_t depth;      // bytes from the root; the root is depth 0
    uint8_t byte;        // the byte on the edge into this node
  };

  // pieces[id] are token id's bytes. Tokens with no bytes (control tokens) are never allowed by a
  // grammar, except the end-of-generation ids in `eog`, allowed only in an accepting state.
  TokenTrie(const std::vector<std::string>& pieces, std::vector<int32_t> eog);
  // From a tokenizer: token_to_piece() of every id (SentencePiece '▁' and byte tokens already
  // decoded to bytes there) and its end-of-generation ids.
  static std::shared_ptr<const TokenTrie> from_tokenizer(const Tokenizer& tokenizer);

  int32_t n_vocab() const { return n_vocab_; }
  std::span<const Node> nodes() const { return nodes_; }
  std::span<const int32_t> ids() const { return ids_; }
  std::span<const int32_t> eog() const { return eog_; }
  bool is_eog(int32_t id) const { return id >= 0 && id < n_vocab_ && eog_flag_[static_cast<size_t>(id)]; }
  const std::string& piece(int32_t id) const { return pieces_[static_cast<size_t>(id)]; }
  size_t max_depth() const { return max_depth_; }

 private:
  int32_t n_vocab_;
  std::vector<std::string> pieces_;
  std::vector<Node> nodes_;
  std::vector<int32_t> ids_;
  std::vector<int32_t> eog_;
  std::vector<char> eog_flag_;
  size_t max_depth_ = 0;
};

}  // namespace ember::grammar
