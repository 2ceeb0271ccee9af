#include "core/sparse/activation_profiler.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace ember {
namespace {

constexpr int64_t kNeuronChunk = 256;
constexpr int kSums = 5;  // active, active (tokens after the first), repeated, predicted, true positives

size_t sz(int64_t a, int64_t b) { return static_cast<size_t>(a) * static_cast<size_t>(b); }

}  // namespace

int ActivationProfiler::bin_of(float m) {
  if (!(m > 0.0f)) return 0;
  int e = 0;
  const float frac = std::frexp(m, &e);  // m = frac * 2^e, frac in [0.5, 1)
  if (e <= kMinExp) return 1;
  if (e > kMaxExp) return kBins - 1;
  const int sub = std::min(kSubBins - 1, static_cast<int>((frac - 0.5f) * 2.0f * kSubBins));
  return 1 + (e - 1 - kMinExp) * kSubBins + sub;
}

double ActivationProfiler::bin_low(int bin) {
  if (bin == 0) return 0.0;
  const int octave = (bin - 1) / kSubBins, sub = (bin - 1) % kSubBins;
  return std::ldexp(1.0 + static_cast<double>(sub) / kSubBins, kMinExp + octave);
}

double ActivationProfiler::bin_high(int bin) {
  if (bin == 0) return 0.0;
  const int octave = (bin - 1) / kSubBins, sub = (bin - 1) % kSubBins;
  return std::ldexp(1.0 + static_cast<double>(sub + 1) / kSubBins, kMinExp + octave);
}

float ActivationProfiler::percentile(const std::vector<uint64_t>& hist, double q) {
  uint64_t total = 0;
  for (uint64_t c : hist) total += c;
  if (total == 0) return 0.0f;
  const double target = q * static_cast<double>(total);
  double below = 0.0;
  for (int b = 0; b < static_cast<int>(hist.size()); ++b) {
    const auto c = static_cast<double>(hist[static_cast<size_t>(b)]);
    if (c > 0.0 && below + c >= target) {
      if (b == 0) return 0.0f;
      const double f = std::clamp((target - below) / c, 0.0, 1.0);
      return static_cast<float>(bin_low(b) + (bin_high(b) - bin_low(b)) * f);
    }
    below += c;
  }
  for (int b = static_cast<int>(hist.size()) - 1; b >= 0; --b) {
    if (hist[static_cast<size_t>(b)] != 0) return static_cast<float>(bin_high(b));
  }
  return 0.0f;
}

ActivationProfiler::ActivationProfiler(ProfilerSetup setup, int n_threads) : s_(std::move(setup)) {
  if (s_.n_layer <= 0 || s_.n_ff <= 0 || s_.n_embd <= 0 || s_.max_tokens <= 0) {
    throw std::invalid_argument("profiler: empty model shape");
  }
  const bool pred = !s_.fc1.empty();
  if (pred && (static_cast<int64_t>(s_.fc1.size()) != s_.n_layer || s_.fc2.size() != s_.fc1.size())) {
    throw std::invalid_argument("profiler: predictor matrices must be given for every layer");
  }
  n_threads = std::max(n_threads, 1);
  layers_.resize(static_cast<size_t>(s_.n_layer));
  for (LayerState& l : layers_) {
    l.count.assign(static_cast<size_t>(s_.n_ff), 0);
    l.prev.assign(static_cast<size_t>(s_.n_ff), 0);
    l.hist.assign(kBins, 0);
  }
  thread_hist_.assign(sz(n_threads, kBins), 0);
  token_cut_.assign(static_cast<size_t>(s_.max_tokens), 0.0f);
  magnitudes_.assign(sz(n_threads, s_.n_ff), 0.0f);
  const int64_t n_chunks = (s_.n_ff + kNeuronChunk - 1) / kNeuronChunk;
  chunk_sums_.assign(sz(n_chunks, kSums), 0);
  if (pred) {
    int64_t rank = 0;
    for (const MatrixView& m : s_.fc1) rank = std::max(rank, m.rows);
    pred_hidden_.assign(sz(s_.max_tokens, rank), 0.0f);
    pred_scores_.assign(sz(s_.max_tokens, s_.n_ff), 0.0f);
    mm_.reserve(s_.max_tokens, std::max(s_.n_embd, rank));
  }
}

void ActivationProfiler::sequence_break() {
  for (LayerState& l : layers_) l.has_prev = false;
}

uint64_t ActivationProfiler::tokens() const { return layers_.empty() ? 0 : layers_[0].tokens; }

uint64_t ActivationProfiler::tokens(int64_t layer) const { return layers_.at(static_cast<size_t>(layer)).tokens; }

void ActivationProfiler::observe(const FfnObservation& o, ThreadPool& pool) {
  if (o.layer < 0 || o.layer >= s_.n_layer || o.n_ff != s_.n_ff || o.n_tokens > s_.max_tokens || o.n_tokens <= 0) {
    throw std::invalid_argument("profiler: observation does not fit the profiled model");
  }
  LayerState& L = layers_[static_cast<size_t>(o.layer)];
  const int64_t F = s_.n_ff, T = o.n_tokens;
  const FfnActivation act = s_.act;
  const bool silu = act == FfnActivation::SiLU;

  // SiLU neurons are never exactly 0: "active" means in the upper half of the token's |silu(gate)|.
  if (silu) {
    pool.parallel_for(T, [&](int64_t t, int thread) {
      float* m = &magnitudes_[sz(thread, F)];
      const float* g = o.gate + sz(t, F);
      for (int64_t i = 0; i < F; ++i) m[i] = std::fabs(gate_activation(act, g[i]));
      float* mid = m + F / 2;
      std::nth_element(m, mid, m + F);
      token_cut_[static_cast<size_t>(t)] = *mid;
    });
  }
  const bool pred = !s_.fc1.empty();
  if (pred) {
    const MatrixView& fc1 = s_.fc1[static_cast<size_t>(o.layer)];
    const MatrixView& fc2 = s_.fc2[static_cast<size_t>(o.layer)];
    matmul(fc1, o.residual, T, o.n_embd, pred_hidden_.data(), fc1.rows, pool, mm_);
    for (size_t i = 0; i < sz(T, fc1.rows); ++i) pred_hidden_[i] = std::max(pred_hidden_[i], 0.0f);
    matmul(fc2, pred_hidden_.data(), T, fc2.cols, pred_scores_.data(), F, pool, mm_);
  }

  const int64_t n_chunks = (F + kNeuronChunk - 1) / kNeuronChunk;
  const bool had_prev = L.has_prev;
  pool.parallel_for(n_chunks, [&](int64_t c, int thread) {
    const int64_t i0 = c * kNeuronChunk, i1 = std::min(F, i0 + kNeuronChunk);
    uint64_t* hist = &thread_hist_[sz(thread, kBins)];
    uint64_t active = 0, active_after = 0, repeated = 0, predicted = 0, tp = 0;
    for (int64_t t = 0; t < T; ++t) {
      const float* g = o.gate + sz(t, F);
      const float* u = o.up + sz(t, F);
      const bool compare_prev = t > 0 || had_prev;
      for (int64_t i = i0; i < i1; ++i) {
        const float mag = std::fabs(gate_activation(act, g[i]));
        ++hist[bin_of(mag)];
        const bool on = silu ? mag >= token_cut_[static_cast<size_t>(t)] && mag > 0.0f
                             : neuron_activation(act, g[i], u[i]) != 0.0f;
        uint8_t& prev = L.prev[static_cast<size_t>(i)];
        if (on) {
          ++L.count[static_cast<size_t>(i)];
          ++active;
          if (compare_prev) {
            ++active_after;
            repeated += prev;
          }
        }
        prev = on ? 1 : 0;
        if (pred && pred_scores_[sz(t, F) + static_cast<size_t>(i)] > s_.predictor_threshold) {
          ++predicted;
          tp += on ? 1 : 0;
        }
      }
    }
    uint64_t* sums = &chunk_sums_[sz(c, kSums)];
    sums[0] = active;
    sums[1] = active_after;
    sums[2] = repeated;
    sums[3] = predicted;
    sums[4] = tp;
  });
  for (int64_t c = 0; c < n_chunks; ++c) {
    const uint64_t* sums = &chunk_sums_[sz(c, kSums)];
    L.active += sums[0];
    L.active_after_first += sums[1];
    L.repeated += sums[2];
    L.predicted += sums[3];
    L.true_positive += sums[4];
  }
  for (size_t i = 0; i < thread_hist_.size(); ++i) {
    L.hist[i % kBins] += thread_hist_[i];
    thread_hist_[i] = 0;
  }
  L.tokens += static_cast<uint64_t>(T);
  L.has_prev = true;
}

ActivationProfile ActivationProfiler::result() const {
  ActivationProfile p;
  p.activation = activation_name(s_.act);
  p.tokens = tokens();
  p.n_ff = s_.n_ff;
  p.layers.resize(layers_.size());
  for (size_t l = 0; l < layers_.size(); ++l) {
    const LayerState& L = layers_[l];
    LayerActivationProfile& out = p.layers[l];
    const double tokens = static_cast<double>(std::max<uint64_t>(L.tokens, 1));
    out.frequency.resize(L.count.size());
    for (size_t i = 0; i < L.count.size(); ++i) out.frequency[i] = static_cast<float>(static_cast<double>(L.count[i]) / tokens);
    out.gate_magnitude.resize(ActivationProfile::kPercentiles);
    for (int k = 0; k < ActivationProfile::kPercentiles; ++k) {
      out.gate_magnitude[static_cast<size_t>(k)] = percentile(L.hist, static_cast<double>(k) / (ActivationProfile::kPercentiles - 1));
    }
    out.active_fraction = static_cast<double>(L.active) / (tokens * static_cast<double>(s_.n_ff));
    out.locality = L.active_after_first ? static_cast<double>(L.repeated) / static_cast<double>(L.active_after_first) : 0.0;
    if (!s_.fc1.empty()) {
      out.predictor_recall = L.active ? static_cast<double>(L.true_positive) / static_cast<double>(L.active) : 1.0;
      out.predictor_precision = L.predicted ? static_cast<double>(L.true_positive) / static_cast<double>(L.predicted) : 1.0;
    }
  }
  return p;
}

}  // namespace ember
