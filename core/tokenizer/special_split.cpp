#include "core/tokenizer/special_split.h"

namespace ember {

void split_special(const Vocab& vocab, std::string_view text, bool parse_special, std::vector<Fragment>& out) {
  out.clear();
  if (text.empty()) return;
  out.push_back({-1, 0, text.size()});
  std::vector<Fragment> pieces;
  for (int32_t id : vocab.specials_longest_first) {
    if (!parse_special && vocab.type(id) != TokenType::UserDefined) continue;
    const std::string_view special = vocab.tokens[id];
    for (size_t i = 0; i < out.size(); ++i) {
      if (out[i].token >= 0) continue;
      const Fragment raw = out[i];
      const std::string_view raw_text = text.substr(raw.offset, raw.length);
      size_t found = raw_text.find(special);
      if (found == std::string_view::npos) continue;
      pieces.clear();
      size_t cursor = 0;
      while (found != std::string_view::npos) {
        if (found > cursor) pieces.push_back({-1, raw.offset + cursor, found - cursor});
        pieces.push_back({id, 0, 0});
        cursor = found + special.size();
        found = raw_text.find(special, cursor);
      }
      if (cursor < raw.length) pieces.push_back({-1, raw.offset + cursor, raw.length - cursor});
      out.erase(out.begin() + static_cast<std::ptrdiff_t>(i));
      out.insert(out.begin() + static_cast<std::ptrdiff_t>(i), pieces.begin(), pieces.end());
      i += pieces.size() - 1;
    }
  }
}

}  // namespace ember
