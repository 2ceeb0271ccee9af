#pragma once
// A one-line progress bar on stderr for the long offline commands (profile, eval). Draws only when
// stderr is a terminal, so logs and pipes stay clean; redraws at most ~10 times a second.
#include <chrono>
#include <cstdint>
#include <string>

namespace ember::cli {

class ProgressBar {
 public:
  ProgressBar(std::string label, uint64_t total);
  ~ProgressBar();  // finish()es
  void update(uint64_t done);
  void finish();   // draws 100 % and ends the line (once)

 private:
  void draw(uint64_t done);
  std::string label_;
  uint64_t total_;
  bool enabled_;
  bool finished_ = false;
  std::chrono::steady_clock::time_point start_, last_draw_;
};

}  // namespace ember::cli
