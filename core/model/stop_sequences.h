#pragma once
// Stop sequences over streamed text: the text handed on never contains a stop string, and text
// that could still turn out to be the start of one is held back until the next piece decides it.
// Pieces arrive in whatever sizes the detokenizer produces, so a stop string may span tokens.
#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace ember {

class StopSequenceMatcher {
 public:
  StopSequenceMatcher() = default;
  // Empty strings are ignored (they would match before any text). Buffers are sized here, so
  // push() does not allocate while pieces stay shorter than the longest stop string.
  explicit StopSequenceMatcher(std::vector<std::string> stops);

  // Feeds the next piece of text. Appends to `out` what can be released and returns true when a
  // stop string is now complete: `out` then ends just before it, and everything after it is
  // dropped. Once matched, further pushes release nothing.
  bool push(std::string_view piece, std::string& out);
  // End of the generation without a match: appends the held-back text to `out`.
  void flush(std::string& out);

  bool matched() const { return matched_; }
  bool empty() const { return stops_.empty(); }
  size_t held_bytes() const { return held_.size(); }

 private:
  // The length of the longest suffix of held_ that is a proper prefix of some stop string.
  size_t longest_partial_suffix() const;

  std::vector<std::string> stops_;
  size_t longest_stop_ = 0;
  std::string held_;  // text not yet released: always shorter than longest_stop_ between pushes
  bool matched_ = false;
};

}  // namespace ember
