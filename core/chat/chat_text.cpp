#include "core/chat/chat_text.h"

#include <algorithm>
#include <utility>

namespace ember::chat_detail {

std::string_view trim(std::string_view s) {
  constexpr std::string_view ws = " \t\n\r\v\f";
  const size_t first = s.find_first_not_of(ws);
  if (first == std::string_view::npos) return {};
  return s.substr(first, s.find_last_not_of(ws) - first + 1);
}

void ChatText::append(const ChatText& other) {
  for (const ChatSegment& seg : other.segments_) {
    append(std::string_view(other.text_).substr(seg.offset, seg.length), seg.is_content);
  }
}

void ChatText::strip() {
  const std::string_view kept = trim(text_);
  const size_t first = kept.empty() ? 0 : static_cast<size_t>(kept.data() - text_.data());
  const size_t last = first + kept.size();
  std::vector<ChatSegment> cut;
  for (ChatSegment seg : segments_) {
    const size_t begin = std::max(seg.offset, first), end = std::min(seg.offset + seg.length, last);
    if (begin < end) cut.push_back({begin - first, end - begin, seg.is_content});
  }
  text_ = std::string(kept);
  segments_ = std::move(cut);
}

void ChatText::move_into(RenderedChat& r) {
  r.text = std::move(text_);
  r.segments = std::move(segments_);
}

void ChatText::append(std::string_view s, bool is_content) {
  if (s.empty()) return;
  if (!segments_.empty() && segments_.back().is_content == is_content) {
    segments_.back().length += s.size();
  } else {
    segments_.push_back({text_.size(), s.size(), is_content});
  }
  text_ += s;
}

}  // namespace ember::chat_detail
