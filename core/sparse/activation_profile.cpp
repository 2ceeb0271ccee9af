#include "core/sparse/activation_profile.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <numeric>
#include <stdexcept>

#include "core/gguf/gguf_file.h"
#include "core/gguf/gguf_writer.h"

namespace ember {
namespace {

constexpr uint32_t kVersion = 1;
constexpr uint64_t kMaxLayers = 4096;   // of the model; a mixture of experts has n_expert units each
constexpr uint64_t kMaxExperts = 4096;
constexpr uint64_t kMaxNeurons = 1u << 22;

std::string freq_name(int64_t l) { return "blk." + std::to_string(l) + ".neuron_freq"; }
std::string pct_name(int64_t l) { return "blk." + std::to_string(l) + ".gate_magnitude_pct"; }

[[noreturn]] void fail(const std::string& path, const std::string& what) {
  throw std::runtime_error("activation profile " + path + ": " + what);
}

std::vector<float> read_f32_tensor(const gguf::GgufFile& f, const std::string& name, uint64_t n, const std::string& path) {
  const gguf::TensorInfo* t = f.find_tensor(name);
  if (t == nullptr) fail(path, "tensor " + name + " is missing");
  if (t->type != GgmlType::F32 || t->n_elements != n || t->n_dims != 1) {
    fail(path, "tensor " + name + " must be F32 with " + std::to_string(n) + " elements");
  }
  std::vector<float> v(static_cast<size_t>(n));
  f.read_tensor(*t, v.data());
  return v;
}

std::vector<double> layer_array(const gguf::Metadata& m, const std::string& key, uint64_t n_layer,
                                const std::string& path) {
  const auto v = m.get_float_array(key);
  if (!v) fail(path, "key " + key + " is missing");
  if (v->size() != n_layer) fail(path, "key " + key + " must have one value per layer (" + std::to_string(n_layer) + ")");
  return *v;
}

}  // namespace

float ActivationProfile::threshold_for_sparsity(int64_t layer, double sparsity) const {
  const std::vector<float>& p = layers.at(static_cast<size_t>(layer)).gate_magnitude;
  if (!(sparsity >= 0.0 && sparsity < 1.0)) throw std::invalid_argument("sparsity must be in [0, 1)");
  if (sparsity == 0.0) return 0.0f;  // keep every neuron (select_by_gate_magnitude: <= 0 keeps all)
  const double pos = sparsity * static_cast<double>(p.size() - 1);
  const auto i = static_cast<size_t>(pos);
  const double frac = pos - static_cast<double>(i);
  const double lo = p[i], hi = p[std::min(i + 1, p.size() - 1)];
  return static_cast<float>(lo + (hi - lo) * frac);
}

std::vector<float> ActivationProfile::thresholds_for_sparsity(double sparsity) const {
  std::vector<float> t(layers.size());
  for (size_t l = 0; l < layers.size(); ++l) t[l] = threshold_for_sparsity(static_cast<int64_t>(l), sparsity);
  return t;
}

std::vector<int32_t> ActivationProfile::hot_order(int64_t layer) const {
  const std::vector<float>& f = layers.at(static_cast<size_t>(layer)).frequency;
  std::vector<int32_t> order(f.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return f[static_cast<size_t>(a)] > f[static_cast<size_t>(b)]; });
  return order;
}

double hot_share(std::span<const float> frequency, double share) {
  std::vector<double> sorted(frequency.begin(), frequency.end());
  std::sort(sorted.begin(), sorted.end(), std::greater<>());
  const double total = std::accumulate(sorted.begin(), sorted.end(), 0.0);
  if (total <= 0.0) return 0.0;
  const auto n_hot = static_cast<size_t>(std::llround(share * static_cast<double>(sorted.size())));
  return std::accumulate(sorted.begin(), sorted.begin() + static_cast<std::ptrdiff_t>(std::min(n_hot, sorted.size())), 0.0) / total;
}

double ActivationProfile::hot_share(int64_t layer, double share) const {
  return ember::hot_share(layers.at(static_cast<size_t>(layer)).frequency, share);
}

void save_activation_profile(const ActivationProfile& p, const std::string& path) {
  const auto n_layer = static_cast<int64_t>(p.layers.size());
  gguf::GgufWriter w;
  w.add_string("general.type", "ember.activation_profile");
  w.add_u32("ember.profile.version", kVersion);
  w.add_u64("ember.profile.tokens", p.tokens);
  w.add_string("ember.profile.activation", p.activation);
  w.add_u32("ember.profile.n_layer", static_cast<uint32_t>(n_layer));
  w.add_u32("ember.profile.n_ff", static_cast<uint32_t>(p.n_ff));
  if (p.n_expert > 0) w.add_u32("ember.profile.n_expert", static_cast<uint32_t>(p.n_expert));
  std::vector<float> active, locality, recall, precision;
  for (const LayerActivationProfile& l : p.layers) {
    active.push_back(static_cast<float>(l.active_fraction));
    locality.push_back(static_cast<float>(l.locality));
    recall.push_back(static_cast<float>(l.predictor_recall));
    precision.push_back(static_cast<float>(l.predictor_precision));
  }
  w.add_f32_array("ember.profile.active_fraction", active);
  w.add_f32_array("ember.profile.locality", locality);
  w.add_f32_array("ember.profile.predictor_recall", recall);
  w.add_f32_array("ember.profile.predictor_precision", precision);
  for (int64_t l = 0; l < n_layer; ++l) {
    const LayerActivationProfile& lp = p.layers[static_cast<size_t>(l)];
    if (static_cast<int64_t>(lp.frequency.size()) != p.n_ff || lp.gate_magnitude.size() != ActivationProfile::kPercentiles) {
      throw std::invalid_argument("activation profile: layer " + std::to_string(l) + " has the wrong number of values");
    }
    w.add_tensor(freq_name(l), GgmlType::F32, {static_cast<uint64_t>(p.n_ff)});
    w.add_tensor(pct_name(l), GgmlType::F32, {static_cast<uint64_t>(ActivationProfile::kPercentiles)});
  }
  // Written next to the target and renamed over it, so a reader never sees half a profile.
  const std::string tmp = path + ".tmp";
  w.begin(tmp);
  for (const LayerActivationProfile& lp : p.layers) {
    w.write_tensor_data(lp.frequency.data(), lp.frequency.size() * sizeof(float));
    w.write_tensor_data(lp.gate_magnitude.data(), lp.gate_magnitude.size() * sizeof(float));
  }
  w.finish();
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) {
    std::filesystem::remove(tmp, ec);
    throw std::runtime_error("activation profile: cannot rename " + tmp + " to " + path);
  }
}

ActivationProfile load_activation_profile(const std::string& path) {
  gguf::GgufFile f = gguf::GgufFile::open(path);
  const gguf::Metadata& m = f.metadata();
  const auto version = m.get_uint("ember.profile.version");
  if (!version) fail(path, "not an activation profile (no ember.profile.version; make one with `ember profile`)");
  if (*version != kVersion) fail(path, "version " + std::to_string(*version) + " is not supported (expected 1)");
  ActivationProfile p;
  p.tokens = m.get_uint("ember.profile.tokens").value_or(0);
  p.activation = m.get_string("ember.profile.activation").value_or("");
  const uint64_t n_layer = m.get_uint("ember.profile.n_layer").value_or(0);
  const uint64_t n_ff = m.get_uint("ember.profile.n_ff").value_or(0);
  const uint64_t n_expert = m.get_uint("ember.profile.n_expert").value_or(0);
  if (n_expert > kMaxExperts) fail(path, "ember.profile.n_expert must be at most 4096");
  const uint64_t units = std::max<uint64_t>(1, n_expert);
  if (n_layer == 0 || n_layer % units != 0 || n_layer / units > kMaxLayers) {
    fail(path, "ember.profile.n_layer must be in [1, 4096] model layers (times ember.profile.n_expert: one unit per layer and expert)");
  }
  if (n_ff == 0 || n_ff > kMaxNeurons) fail(path, "ember.profile.n_ff must be in [1, 2^22]");
  p.n_ff = static_cast<int64_t>(n_ff);
  p.n_expert = static_cast<int64_t>(n_expert);
  const auto active = layer_array(m, "ember.profile.active_fraction", n_layer, path);
  const auto locality = layer_array(m, "ember.profile.locality", n_layer, path);
  const auto recall = layer_array(m, "ember.profile.predictor_recall", n_layer, path);
  const auto precision = layer_array(m, "ember.profile.predictor_precision", n_layer, path);
  p.layers.resize(n_layer);
  for (uint64_t l = 0; l < n_layer; ++l) {
    LayerActivationProfile& lp = p.layers[l];
    lp.frequency = read_f32_tensor(f, freq_name(static_cast<int64_t>(l)), n_ff, path);
    lp.gate_magnitude = read_f32_tensor(f, pct_name(static_cast<int64_t>(l)), ActivationProfile::kPercentiles, path);
    for (float v : lp.frequency) {
      if (!(v >= 0.0f && v <= 1.0f)) fail(path, freq_name(static_cast<int64_t>(l)) + " holds a value outside [0, 1]");
    }
    for (size_t k = 0; k < lp.gate_magnitude.size(); ++k) {
      const float v = lp.gate_magnitude[k];
      if (!(v >= 0.0f) || !std::isfinite(v) || (k > 0 && v < lp.gate_magnitude[k - 1])) {
        fail(path, pct_name(static_cast<int64_t>(l)) + " must hold finite, non-negative, non-decreasing values");
      }
    }
    lp.active_fraction = active[l];
    lp.locality = locality[l];
    lp.predictor_recall = recall[l];
    lp.predictor_precision = precision[l];
  }
  return p;
}

void check_profile_matches(const ActivationProfile& p, int64_t n_layer, int64_t n_ff, int64_t n_expert) {
  if (p.n_expert != n_expert) {
    auto shape = [](int64_t e) { return e > 0 ? "a mixture of " + std::to_string(e) + " experts" : std::string("a dense FFN"); };
    throw std::invalid_argument("the activation profile was made for a model with " + shape(p.n_expert) +
                                "; this one has " + shape(n_expert));
  }
  n_layer *= std::max<int64_t>(1, n_expert);
  if (static_cast<int64_t>(p.layers.size()) != n_layer || p.n_ff != n_ff) {
    throw std::invalid_argument("the activation profile was made for a model with " + std::to_string(p.layers.size()) +
                                " layers of " + std::to_string(p.n_ff) + " FFN neurons; this one has " +
                                std::to_string(n_layer) + " layers of " + std::to_string(n_ff));
  }
}

}  // namespace ember
