#include "server/keep_alive.h"

#include <charconv>
#include <cmath>
#include <stdexcept>

namespace ember::server {

namespace {

using std::chrono::milliseconds;

// A week is far beyond any idle period worth a timer; "forever" is a negative value.
constexpr double kMaxSeconds = 7.0 * 24 * 3600;

[[noreturn]] void bad(const std::string& got) {
  throw std::invalid_argument(
      "must be a number of seconds or a duration such as \"30s\", \"5m\", \"1h\" (negative: keep loaded, 0: unload "
      "after the request), got " + got);
}

milliseconds from_seconds(double seconds, const std::string& shown) {
  if (!std::isfinite(seconds)) bad(shown);
  if (seconds < 0) return milliseconds(-1);
  if (seconds > kMaxSeconds) bad(shown + " (at most a week; use a negative value to keep it loaded)");
  return milliseconds(static_cast<int64_t>(std::llround(seconds * 1000.0)));
}

}  // namespace

milliseconds parse_keep_alive(const nlohmann::json& value) {
  if (value.is_number()) return from_seconds(value.get<double>(), value.dump());
  if (!value.is_string()) bad(value.dump().substr(0, 40));
  const std::string text = value.get<std::string>();
  // Appended piece by piece: GCC 12 warns falsely (-Wrestrict) about a chain of + on substr().
  std::string shown(1, '"');
  shown.append(text, 0, 40);
  shown.push_back('"');
  double number = 0;
  const char* begin = text.data();
  const char* end = text.data() + text.size();
  const auto [rest, ec] = std::from_chars(begin, end, number);
  if (ec != std::errc() || rest == begin) bad(shown);
  const std::string unit(rest, end);
  if (unit.empty() || unit == "s") return from_seconds(number, shown);
  if (unit == "ms") return from_seconds(number / 1000.0, shown);
  if (unit == "m") return from_seconds(number * 60.0, shown);
  if (unit == "h") return from_seconds(number * 3600.0, shown);
  bad(shown);
}

std::string keep_alive_text(milliseconds value) {
  const int64_t ms = value.count();
  if (ms < 0) return "-1";
  if (ms == 0) return "0";
  if (ms % 3'600'000 == 0) return std::to_string(ms / 3'600'000) + "h";
  if (ms % 60'000 == 0) return std::to_string(ms / 60'000) + "m";
  if (ms % 1000 == 0) return std::to_string(ms / 1000) + "s";
  return std::to_string(ms) + "ms";
}

}  // namespace ember::server
