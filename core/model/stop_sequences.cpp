#include "core/model/stop_sequences.h"

#include <algorithm>

namespace ember {

StopSequenceMatcher::StopSequenceMatcher(std::vector<std::string> stops) {
  for (auto& s : stops) {
    if (s.empty()) continue;
    longest_stop_ = std::max(longest_stop_, s.size());
    stops_.push_back(std::move(s));
  }
  // Room for what is held back plus a generous piece: typical tokens never grow the buffer.
  held_.reserve(longest_stop_ + 256);
}

bool StopSequenceMatcher::push(std::string_view piece, std::string& out) {
  if (matched_) return true;
  if (stops_.empty()) {
    out.append(piece);
    return false;
  }
  held_.append(piece);
  // The earliest match wins: text before it is released, the rest is dropped.
  size_t first = std::string::npos;
  for (const auto& s : stops_) first = std::min(first, held_.find(s));
  if (first != std::string::npos) {
    out.append(held_, 0, first);
    held_.clear();
    matched_ = true;
    return true;
  }
  // Text that cannot be the start of a stop string is final: a match starting there would already
  // be complete (and found above) or would need text that differs from what came.
  const size_t keep = longest_partial_suffix();
  const size_t release = held_.size() - keep;
  out.append(held_, 0, release);
  held_.erase(0, release);
  return false;
}

void StopSequenceMatcher::flush(std::string& out) {
  if (!matched_) out.append(held_);
  held_.clear();
}

size_t StopSequenceMatcher::longest_partial_suffix() const {
  const std::string_view held(held_);
  for (size_t len = std::min(held.size(), longest_stop_ - 1); len > 0; --len) {
    const std::string_view tail = held.substr(held.size() - len);
    for (const auto& s : stops_) {
      if (s.size() > len && std::string_view(s).starts_with(tail)) return len;
    }
  }
  return 0;
}

}  // namespace ember
