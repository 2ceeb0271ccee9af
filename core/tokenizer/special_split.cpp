#include "core/tokenizer/special_split.h"

namespace ember {
namespace {

// Cuts every occurrence of `special` (token `id`) out of the raw fragments of `in`, appending the
// result to `out`. Builds a new list instead of splicing in place: splicing costs a shift of the
// whole list per split fragment, quadratic on a prompt made of many special-token texts.
void split_one(std::string_view text, int32_t id, std::string_view special, const std::vector<Fragment>& in,
               std::vector<Fragment>& out) {
  for (const Fragment& f : in) {
    if (f.token >= 0) {
      out.push_back(f);
      continue;
    }
    const std::string_view raw = text.substr(f.offset, f.length);
    size_t cursor = 0;
    for (size_t found = raw.find(special); found != std::string_view::npos; found = raw.find(special, cursor)) {
      if (found > cursor) out.push_back({-1, f.offset + cursor, found - cursor});
      out.push_back({id, 0, 0});
      cursor = found + special.size();
    }
    if (cursor < raw.size()) out.push_back({-1, f.offset + cursor, raw.size() - cursor});
  }
}

bool occurs_in_raw(std::string_view text, std::string_view special, const std::vector<Fragment>& fragments) {
  for (const Fragment& f : fragments) {
    if (f.token < 0 && text.substr(f.offset, f.length).find(special) != std::string_view::npos) return true;
  }
  return false;
}

}  // namespace

void split_special(const Vocab& vocab, std::string_view text, bool parse_special, std::vector<Fragment>& out) {
  out.clear();
  if (text.empty()) return;
  out.push_back({-1, 0, text.size()});
  std::vector<Fragment> next;
  for (int32_t id : vocab.specials_longest_first) {
    if (!parse_special && vocab.type(id) != TokenType::UserDefined) continue;
    const std::string_view special = vocab.tokens[id];
    if (special.empty()) continue;  // index_types() leaves these out; find("") would never advance
    if (!occurs_in_raw(text, special, out)) continue;  // the common case: copy nothing
    next.clear();
    split_one(text, id, special, out, next);
    out.swap(next);
  }
}

}  // namespace ember
