#pragma once
// The one exception type of the grammar engine: malformed GBNF (with the line and column of the
// fault), a grammar over the limits, left recursion, or a grammar state that grew past its bounds
// while matching. Callers (an HTTP handler) turn it into a 400 with what().
#include <stdexcept>
#include <string>

namespace ember::grammar {

class GrammarError : public std::runtime_error {
 public:
  explicit GrammarError(const std::string& message, int line = 0, int column = 0)
      : std::runtime_error(line > 0 ? "grammar:" + std::to_string(line) + ":" + std::to_string(column) + ": " + message
                                    : "grammar: " + message),
        line_(line),
        column_(column) {}
  int line() const { return line_; }      // 1-based; 0 when the error has no position
  int column() const { return column_; }  // 1-based, in bytes

 private:
  int line_;
  int column_;
};

}  // namespace ember::grammar
