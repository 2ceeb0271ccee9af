#include "core/tokenizer/spm.h"

#include <algorithm>
#include <queue>

#include "core/tokenizer/utf8.h"

namespace ember {
namespace {

struct Symbol {
  int32_t prev = -1;
  int32_t next = -1;
  size_t offset = 0;
  size_t n = 0;  // 0 once merged into its left neighbour
};

struct Bigram {
  int32_t left = 0;
  int32_t right = 0;
  float score = 0;
  size_t size = 0;  // of the merged text, to spot pairs made stale by another merge
};

struct LowerPriority {
  bool operator()(const Bigram& a, const Bigram& b) const {
    return a.score < b.score || (a.score == b.score && a.left > b.left);
  }
};

class SpmSession {
 public:
  SpmSession(const Vocab& vocab, std::string_view text) : vocab_(vocab), text_(text) {}

  void run(std::vector<int32_t>& out) {
    for (size_t offset = 0; offset < text_.size();) {
      const size_t n = std::min(utf8::sequence_length(static_cast<unsigned char>(text_[offset])),
                                text_.size() - offset);
      Symbol s;
      s.offset = offset;
      s.n = n;
      s.prev = static_cast<int32_t>(symbols_.size()) - 1;
      s.next = offset + n < text_.size() ? static_cast<int32_t>(symbols_.size()) + 1 : -1;
      symbols_.push_back(s);
      offset += n;
    }
    for (size_t i = 1; i < symbols_.size(); ++i) try_pair(static_cast<int32_t>(i) - 1, static_cast<int32_t>(i));

    while (!queue_.empty()) {
      const Bigram b = queue_.top();
      queue_.pop();
      Symbol& left = symbols_[b.left];
      Symbol& right = symbols_[b.right];
      if (left.n == 0 || right.n == 0 || left.n + right.n != b.size) continue;
      left.n += right.n;
      right.n = 0;
      left.next = right.next;
      if (right.next >= 0) symbols_[right.next].prev = b.left;
      try_pair(left.prev, b.left);
      try_pair(b.left, left.next);
    }

    for (int32_t i = symbols_.empty() ? -1 : 0; i != -1; i = symbols_[i].next) emit(symbols_[i], out);
  }

 private:
  std::string_view text_of(const Symbol& s) const { return text_.substr(s.offset, s.n); }

  void try_pair(int32_t left, int32_t right) {
    if (left < 0 || right < 0) return;
    const Symbol& l = symbols_[left];
    const size_t size = l.n + symbols_[right].n;
    const int32_t id = vocab_.find(text_.substr(l.offset, size));
    if (id < 0) return;
    queue_.push(Bigram{left, right, vocab_.score(id), size});
  }

  // A merged symbol is always a token; only single characters can be missing from the vocabulary.
  void emit(const Symbol& s, std::vector<int32_t>& out) const {
    const std::string_view text = text_of(s);
    const int32_t id = vocab_.find(text);
    if (id >= 0) {
      out.push_back(id);
      return;
    }
    for (unsigned char byte : text) {
      const int32_t byte_id = vocab_.byte_token[byte];
      if (byte_id >= 0) {
        out.push_back(byte_id);
      } else if (vocab_.unk >= 0) {
        out.push_back(vocab_.unk);
      }
    }
  }

  const Vocab& vocab_;
  std::string_view text_;
  std::vector<Symbol> symbols_;
  std::priority_queue<Bigram, std::vector<Bigram>, LowerPriority> queue_;
};

}  // namespace

void spm_tokenize(const Vocab& vocab, std::string_view escaped, std::vector<int32_t>& out) {
  SpmSession(vocab, escaped).run(out);
}

}  // namespace ember
