#include "core/synth/synth_vocab.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <map>
#include <queue>
#include <stdexcept>
#include <unordered_map>

#include "core/sampling/rng.h"
#include "core/synth/word_list.h"

namespace ember::synth {

namespace {

constexpr std::string_view kSpace = "\xE2\x96\x81";  // U+2581, SentencePiece's visible space
constexpr std::string_view kPunctuation = ".,;:!?'\"-()[]{}/\\@#$%&*+=<>_~`|^";

// The text to learn from: word -> weight. Real words get Zipf-like weights large enough that the
// common ones become single pieces early; pseudo-words (weight 1..3) supply syllable pieces.
std::map<std::string, int64_t> build_corpus(int32_t n_vocab) {
  std::map<std::string, int64_t> corpus;
  const auto words = common_english_words();
  for (size_t rank = 0; rank < words.size(); ++rank) {
    const std::string word(words[rank]);
    const int64_t weight = 200000 / static_cast<int64_t>(rank + 10);
    corpus[std::string(kSpace) + word] += weight;
    std::string capital = word;
    capital[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(capital[0])));
    corpus[std::string(kSpace) + capital] += weight / 4 + 1;
  }
  Rng rng(0x5EEDF00Dull);  // fixed: the vocabulary must not depend on the weight seed
  const auto onsets = syllable_onsets(), nuclei = syllable_nuclei(), codas = syllable_codas();
  const auto suffixes = word_suffixes();
  auto pick = [&rng](std::span<const std::string_view> list) { return list[rng.next_u64() % list.size()]; };
  const int64_t n_pseudo = 4 * static_cast<int64_t>(n_vocab);
  for (int64_t i = 0; i < n_pseudo; ++i) {
    std::string word(kSpace);
    const int syllables = 1 + static_cast<int>(rng.next_u64() % 3);
    for (int s = 0; s < syllables; ++s) {
      word += pick(onsets);
      word += pick(nuclei);
      word += pick(codas);
    }
    word += pick(suffixes);
    corpus[word] += 1 + static_cast<int64_t>(rng.next_u64() % 3);
  }
  return corpus;
}

// Splits UTF-8 text into characters (the corpus is ASCII plus "▁").
std::vector<std::string> utf8_chars(const std::string& s) {
  std::vector<std::string> out;
  for (size_t i = 0; i < s.size();) {
    const auto c = static_cast<unsigned char>(s[i]);
    const size_t len = c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
    out.push_back(s.substr(i, len));
    i += len;
  }
  return out;
}

// Byte-pair merge learning over a weighted word list. Returns the new pieces in merge order.
class MergeLearner {
 public:
  MergeLearner(const std::map<std::string, int64_t>& corpus, const std::vector<std::string>& base) {
    for (const auto& b : base) intern(b);
    for (const auto& [word, weight] : corpus) {
      Word w{{}, weight};
      for (const auto& ch : utf8_chars(word)) w.symbols.push_back(intern(ch));
      words_.push_back(std::move(w));
    }
    for (size_t i = 0; i < words_.size(); ++i) add_pairs(static_cast<int32_t>(i));
    for (const auto& [key, count] : pair_count_) heap_.push({count, key});
  }

  std::vector<std::string> learn(size_t max_new) {
    std::vector<std::string> learned;
    std::vector<int32_t> stamp(words_.size(), -1);
    int32_t round = 0;
    while (learned.size() < max_new && !heap_.empty()) {
      const auto [count, key] = heap_.top();
      heap_.pop();
      const auto it = pair_count_.find(key);
      if (it == pair_count_.end() || it->second != count || count <= 0) continue;  // stale entry
      const int32_t a = static_cast<int32_t>(key >> 32), b = static_cast<int32_t>(key & 0xFFFFFFFFu);
      const std::string text = symbols_[static_cast<size_t>(a)] + symbols_[static_cast<size_t>(b)];
      const bool is_new = !ids_.contains(text);
      const int32_t merged = intern(text);
      if (is_new) learned.push_back(text);
      ++round;
      touched_.clear();
      // (a, b) cannot reappear once merged (no new a or b is ever made), so its word list is spent.
      const std::vector<int32_t> where = std::move(where_[key]);
      where_.erase(key);
      for (int32_t wi : where) {
        if (stamp[static_cast<size_t>(wi)] == round) continue;
        stamp[static_cast<size_t>(wi)] = round;
        merge_in_word(wi, a, b, merged);
      }
      pair_count_[key] = 0;
      std::sort(touched_.begin(), touched_.end());
      touched_.erase(std::unique(touched_.begin(), touched_.end()), touched_.end());
      for (uint64_t k : touched_)
        if (pair_count_[k] > 0) heap_.push({pair_count_[k], k});
    }
    return learned;
  }

 private:
  struct Word {
    std::vector<int32_t> symbols;
    int64_t weight;
  };
  struct Entry {
    int64_t count;
    uint64_t key;
    // Highest count first; ties go to the smaller key so the result never depends on hash order.
    bool operator<(const Entry& o) const { return count < o.count || (count == o.count && key > o.key); }
  };
  static uint64_t pair_key(int32_t a, int32_t b) { return (static_cast<uint64_t>(a) << 32) | static_cast<uint32_t>(b); }

  int32_t intern(const std::string& s) {
    const auto [it, inserted] = ids_.try_emplace(s, static_cast<int32_t>(symbols_.size()));
    if (inserted) symbols_.push_back(s);
    return it->second;
  }

  void add_pairs(int32_t wi) {
    const Word& w = words_[static_cast<size_t>(wi)];
    for (size_t i = 0; i + 1 < w.symbols.size(); ++i) {
      const uint64_t k = pair_key(w.symbols[i], w.symbols[i + 1]);
      pair_count_[k] += w.weight;
      where_[k].push_back(wi);
    }
  }

  void pairs_of(const std::vector<int32_t>& syms, std::vector<uint64_t>& out) const {
    out.clear();
    for (size_t i = 0; i + 1 < syms.size(); ++i) out.push_back(pair_key(syms[i], syms[i + 1]));
    std::sort(out.begin(), out.end());
  }

  // Rewrites one word and updates the counts of only the pairs that changed, so the heap is not
  // flooded with entries for pairs the merge did not touch.
  void merge_in_word(int32_t wi, int32_t a, int32_t b, int32_t merged) {
    Word& w = words_[static_cast<size_t>(wi)];
    pairs_of(w.symbols, old_pairs_);
    auto& syms = w.symbols;
    size_t out = 0;
    for (size_t i = 0; i < syms.size(); ++i) {
      if (i + 1 < syms.size() && syms[i] == a && syms[i + 1] == b) {
        syms[out++] = merged;
        ++i;
      } else {
        syms[out++] = syms[i];
      }
    }
    syms.resize(out);
    pairs_of(syms, new_pairs_);
    size_t i = 0, j = 0;
    while (i < old_pairs_.size() || j < new_pairs_.size()) {
      if (j == new_pairs_.size() || (i < old_pairs_.size() && old_pairs_[i] < new_pairs_[j])) {
        pair_count_[old_pairs_[i]] -= w.weight;
        touched_.push_back(old_pairs_[i++]);
      } else if (i == old_pairs_.size() || new_pairs_[j] < old_pairs_[i]) {
        pair_count_[new_pairs_[j]] += w.weight;
        where_[new_pairs_[j]].push_back(wi);
        touched_.push_back(new_pairs_[j++]);
      } else {
        ++i, ++j;
      }
    }
  }

  std::vector<std::string> symbols_;
  std::unordered_map<std::string, int32_t> ids_;
  std::vector<Word> words_;
  std::unordered_map<uint64_t, int64_t> pair_count_;
  std::unordered_map<uint64_t, std::vector<int32_t>> where_;
  std::priority_queue<Entry> heap_;
  std::vector<uint64_t> touched_;
  std::vector<uint64_t> old_pairs_, new_pairs_;
};

}  // namespace

Vocabulary build_vocabulary(int32_t n_vocab) {
  if (n_vocab < kMinSynthVocab)
    throw std::invalid_argument("synth: vocabulary size " + std::to_string(n_vocab) + " is below the minimum " +
                                std::to_string(kMinSynthVocab));
  Vocabulary v;
  auto add = [&v](std::string text, float score, TokenType type) {
    v.tokens.push_back(std::move(text));
    v.scores.push_back(score);
    v.types.push_back(static_cast<int32_t>(type));
  };
  add("<unk>", 0.0f, TokenType::Unknown);
  add("<s>", 0.0f, TokenType::Control);
  add("</s>", 0.0f, TokenType::Control);
  for (int byte = 0; byte < 256; ++byte) {
    char name[8];
    std::snprintf(name, sizeof name, "<0x%02X>", byte);
    add(name, 0.0f, TokenType::Byte);
  }

  std::vector<std::string> chars{std::string(kSpace)};
  for (char c = 'a'; c <= 'z'; ++c) chars.emplace_back(1, c);
  for (char c = 'A'; c <= 'Z'; ++c) chars.emplace_back(1, c);
  for (char c = '0'; c <= '9'; ++c) chars.emplace_back(1, c);
  for (char c : kPunctuation) chars.emplace_back(1, c);

  const size_t n_learned = static_cast<size_t>(n_vocab) - v.tokens.size() - chars.size();
  MergeLearner learner(build_corpus(n_vocab), chars);
  const auto learned = learner.learn(n_learned);
  // Merge rank decides which pair SPM joins first; single characters are never a merge result,
  // so like in Llama's own vocabulary they come last with the lowest scores.
  float score = 0.0f;
  for (const auto& piece : learned) add(piece, score -= 1.0f, TokenType::Normal);
  for (const auto& c : chars) add(c, score -= 1.0f, TokenType::Normal);
  for (int32_t i = 0; v.size() < n_vocab; ++i) add("<unused" + std::to_string(i) + ">", 0.0f, TokenType::Unused);
  return v;
}

}  // namespace ember::synth
