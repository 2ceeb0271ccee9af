// Integer bounds as an exact grammar: the classic split of a range into digit-prefix blocks
// ([123, 456] = 12[3-9] | 1[3-9][0-9] | [23][0-9][0-9] | 4[0-4][0-9] | 45[0-6]), one block list per
// digit count. The expression grows with the square of the digit count, never with the range.
#include <string>
#include <vector>

#include "core/grammar/schema_parts.h"

namespace ember::grammar::detail {
namespace {

// Built with append(): GCC 12 reports a bogus -Wrestrict for `std::string("x") + c + "y"`.
std::string quoted_digit(char d) {
  std::string out = "\"";
  out.append(1, d).append("\"");
  return out;
}

std::string digit_class(char lo, char hi) {
  if (lo == hi) return quoted_digit(lo);
  std::string out = "[";
  out.append(1, lo).append("-").append(1, hi).append("]");
  return out;
}

std::string any_digits(size_t n) {
  if (n == 0) return "";
  if (n == 1) return "[0-9]";
  return "[0-9]{" + std::to_string(n) + "}";
}

std::string join(const std::vector<std::string>& parts) {
  std::string out;
  for (const auto& p : parts) {
    if (!out.empty()) out += " | ";
    out += p;
  }
  return parts.size() > 1 ? "(" + out + ")" : out;
}

// All strings of a.size() digits between a and b (equal lengths, a <= b).
std::string same_length(const std::string& a, const std::string& b) {
  size_t i = 0;
  while (i < a.size() && a[i] == b[i]) ++i;
  std::string prefix;
  if (i > 0) prefix.append("\"").append(a, 0, i).append("\"");
  if (i == a.size()) return prefix.empty() ? "\"\"" : prefix;
  const size_t rest = a.size() - i - 1;
  const std::string a_rest = a.substr(i + 1), b_rest = b.substr(i + 1);
  const bool low_full = a_rest.find_first_not_of('0') == std::string::npos;
  const bool high_full = b_rest.find_first_not_of('9') == std::string::npos;
  std::vector<std::string> parts;
  if (!low_full) parts.push_back(quoted_digit(a[i]) + " " + same_length(a_rest, std::string(rest, '9')));
  const char start = low_full ? a[i] : static_cast<char>(a[i] + 1);
  const char end = high_full ? b[i] : static_cast<char>(b[i] - 1);
  if (start <= end) {
    std::string block = digit_class(start, end);
    if (rest > 0) block.append(" ").append(any_digits(rest));
    parts.push_back(block);
  }
  if (!high_full) parts.push_back(quoted_digit(b[i]) + " " + same_length(std::string(rest, '0'), b_rest));
  const std::string body = join(parts);
  return prefix.empty() ? body : prefix + " " + body;
}

std::string unsigned_range(uint64_t lo, uint64_t hi) {
  std::vector<std::string> parts;
  const std::string hs = std::to_string(hi);
  for (size_t len = std::to_string(lo).size(); len <= hs.size(); ++len) {
    uint64_t first = 1;
    for (size_t k = 1; k < len; ++k) first *= 10;
    if (len == 1) first = 0;
    const uint64_t last = first == 0 ? 9 : first * 10 - 1;
    const uint64_t a = std::max(lo, first), b = std::min(hi, last);
    if (a <= b) parts.push_back(same_length(std::to_string(a), std::to_string(b)));
  }
  return join(parts);
}

}  // namespace

std::string int_range_to_gbnf(int64_t lo, int64_t hi) {
  // Callers keep |bounds| below 10^17, so negation cannot overflow.
  if (hi < 0) return "\"-\" " + unsigned_range(static_cast<uint64_t>(-hi), static_cast<uint64_t>(-lo));
  if (lo >= 0) return unsigned_range(static_cast<uint64_t>(lo), static_cast<uint64_t>(hi));
  return "(\"-\" " + unsigned_range(1, static_cast<uint64_t>(-lo)) + " | " + unsigned_range(0, static_cast<uint64_t>(hi)) +
         ")";
}

}  // namespace ember::grammar::detail
