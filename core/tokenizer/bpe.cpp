#include "core/tokenizer/bpe.h"

#include <algorithm>

#include "core/tokenizer/utf8.h"

namespace ember {
namespace {

// std::push_heap keeps the "largest" on top: the largest is the lowest rank, then the leftmost.
bool lower_priority(const BpeScratch::Bigram& a, const BpeScratch::Bigram& b) {
  return a.rank > b.rank || (a.rank == b.rank && a.left > b.left);
}

class BpeWord {
 public:
  BpeWord(const Vocab& vocab, std::string_view word, BpeScratch& s) : vocab_(vocab), word_(word), s_(s) {}

  void run(std::vector<int32_t>& out) {
    s_.symbols.clear();
    s_.heap.clear();
    for (size_t offset = 0; offset < word_.size();) {
      const size_t n = std::min(utf8::sequence_length(static_cast<unsigned char>(word_[offset])),
                                word_.size() - offset);
      const auto index = static_cast<int32_t>(s_.symbols.size());
      s_.symbols.push_back({index - 1, offset + n < word_.size() ? index + 1 : -1,
                            static_cast<uint32_t>(offset), static_cast<uint32_t>(n)});
      offset += n;
    }
    for (size_t i = 1; i < s_.symbols.size(); ++i) try_pair(static_cast<int32_t>(i) - 1, static_cast<int32_t>(i));

    while (!s_.heap.empty()) {
      std::pop_heap(s_.heap.begin(), s_.heap.end(), lower_priority);
      const BpeScratch::Bigram b = s_.heap.back();
      s_.heap.pop_back();
      auto& left = s_.symbols[b.left];
      auto& right = s_.symbols[b.right];
      if (left.n != b.left_n || right.n != b.right_n || left.n == 0 || right.n == 0) continue;
      left.n += right.n;
      right.n = 0;
      left.next = right.next;
      if (right.next >= 0) s_.symbols[right.next].prev = b.left;
      try_pair(left.prev, b.left);
      try_pair(b.left, left.next);
    }

    for (int32_t i = s_.symbols.empty() ? -1 : 0; i != -1; i = s_.symbols[i].next) emit(s_.symbols[i], out);
  }

 private:
  std::string_view text_of(const BpeScratch::Symbol& s) const { return word_.substr(s.offset, s.n); }

  void try_pair(int32_t left, int32_t right) {
    if (left < 0 || right < 0) return;
    const auto& l = s_.symbols[left];
    const auto& r = s_.symbols[right];
    const int32_t rank = vocab_.merges.rank(text_of(l), text_of(r));
    if (rank < 0) return;
    s_.heap.push_back({rank, left, right, l.n, r.n});
    std::push_heap(s_.heap.begin(), s_.heap.end(), lower_priority);
  }

  void emit(const BpeScratch::Symbol& s, std::vector<int32_t>& out) const {
    const std::string_view text = text_of(s);
    const int32_t id = vocab_.find(text);
    if (id >= 0) {
      out.push_back(id);
      return;
    }
    // Not a token (a merge whose result the vocabulary lacks): its single bytes, where they are tokens.
    for (size_t i = 0; i < text.size(); ++i) {
      const int32_t byte_id = vocab_.find(text.substr(i, 1));
      if (byte_id >= 0) out.push_back(byte_id);
    }
  }

  const Vocab& vocab_;
  std::string_view word_;
  BpeScratch& s_;
};

}  // namespace

void bpe_tokenize_word(const Vocab& vocab, std::string_view word, BpeScratch& scratch,
                       std::vector<int32_t>& out) {
  BpeWord(vocab, word, scratch).run(out);
}

}  // namespace ember
