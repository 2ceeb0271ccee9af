#include "core/model/ops.h"

#include <cmath>

namespace ember {

void rms_norm(const float* x, const float* w, float* y, int64_t n, float eps) {
  double sum = 0.0;  // ggml accumulates the squares in double
  for (int64_t i = 0; i < n; ++i) sum += static_cast<double>(x[i] * x[i]);
  const float mean = static_cast<float>(sum / static_cast<double>(n));
  const float scale = 1.0f / std::sqrt(mean + eps);
  for (int64_t i = 0; i < n; ++i) y[i] = x[i] * scale;  // two steps, as ggml's rms_norm then mul
  for (int64_t i = 0; i < n; ++i) y[i] = y[i] * w[i];
}

void rope_table(int64_t pos, int64_t n_rot, float theta, float* cs) {
  const float theta_scale = std::pow(theta, -2.0f / static_cast<float>(n_rot));
  float angle = static_cast<float>(pos);
  for (int64_t i = 0; i < n_rot; i += 2) {
    cs[i] = std::cos(angle);
    cs[i + 1] = std::sin(angle);
    angle *= theta_scale;
  }
}

void rope_apply(float* x, int64_t n_heads, int64_t head_dim, int64_t n_rot, const float* cs) {
  for (int64_t h = 0; h < n_heads; ++h) {
    float* v = x + h * head_dim;
    for (int64_t i = 0; i < n_rot; i += 2) {
      const float c = cs[i], s = cs[i + 1];
      const float x0 = v[i], x1 = v[i + 1];
      v[i] = x0 * c - x1 * s;
      v[i + 1] = x0 * s + x1 * c;
    }
  }
}

void add_in_place(float* x, const float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) x[i] += y[i];
}

}  // namespace ember
