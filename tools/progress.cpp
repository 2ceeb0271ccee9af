#include "tools/progress.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>

namespace ember::cli {

ProgressBar::ProgressBar(std::string label, uint64_t total)
    : label_(std::move(label)),
      total_(std::max<uint64_t>(total, 1)),
      enabled_(isatty(STDERR_FILENO) == 1),
      start_(std::chrono::steady_clock::now()),
      last_draw_(start_ - std::chrono::seconds(1)) {}

ProgressBar::~ProgressBar() { finish(); }

void ProgressBar::update(uint64_t done) {
  if (!enabled_ || finished_) return;
  const auto now = std::chrono::steady_clock::now();
  if (now - last_draw_ < std::chrono::milliseconds(100)) return;
  last_draw_ = now;
  draw(done);
}

void ProgressBar::finish() {
  if (finished_) return;
  finished_ = true;
  if (!enabled_) return;
  draw(total_);
  std::fputc('\n', stderr);
}

void ProgressBar::draw(uint64_t done) {
  constexpr int kWidth = 30;
  done = std::min(done, total_);
  const double frac = static_cast<double>(done) / static_cast<double>(total_);
  const int filled = static_cast<int>(frac * kWidth);
  const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  const double eta = done > 0 ? elapsed * static_cast<double>(total_ - done) / static_cast<double>(done) : 0.0;
  std::string bar(static_cast<size_t>(filled), '#');
  bar.resize(kWidth, '.');
  std::fprintf(stderr, "\r%s [%s] %3.0f%% %llu/%llu  %.0fs elapsed, ~%.0fs left  ", label_.c_str(), bar.c_str(),
               frac * 100.0, static_cast<unsigned long long>(done), static_cast<unsigned long long>(total_), elapsed,
               eta);
  std::fflush(stderr);
}

}  // namespace ember::cli
