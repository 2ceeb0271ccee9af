#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <cstring>
#include <ios>
#include <vector>

#include "core/kernels/fp16.h"

using namespace ember;

namespace {
float from_bits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}
bool is_half_nan(uint16_t h) { return (h & 0x7C00) == 0x7C00 && (h & 0x3FF) != 0; }
}  // namespace

TEST_CASE("fp16 -> fp32 -> fp16 round-trips every half exactly") {
  for (uint32_t h = 0; h < 65536; ++h) {
    const float f = fp16_to_fp32(static_cast<uint16_t>(h));
    if (is_half_nan(static_cast<uint16_t>(h))) {
      CHECK(std::isnan(f));
      continue;
    }
    REQUIRE(fp32_to_fp16(f) == h);
  }
}

TEST_CASE("fp16 table: every entry is fp16_to_fp32 of its index, bit for bit (NaNs included)") {
  // The sparse kernels read weight scales through the table and promise the scalar kernels' floats.
  const float* table = fp16_to_fp32_table();
  REQUIRE(table == fp16_to_fp32_table());  // built once
  int mismatches = 0;
  for (uint32_t h = 0; h < 65536; ++h) {
    const float want = fp16_to_fp32(static_cast<uint16_t>(h));
    mismatches += std::memcmp(&table[h], &want, sizeof want) != 0 ? 1 : 0;
  }
  CHECK(mismatches == 0);
}

TEST_CASE("fp16 known values and round-to-nearest-even") {
  CHECK(fp16_to_fp32(0x3C00) == 1.0f);
  CHECK(fp16_to_fp32(0xC000) == -2.0f);
  CHECK(fp16_to_fp32(0x7BFF) == 65504.0f);
  CHECK(fp16_to_fp32(0x0001) == std::ldexp(1.0f, -24));
  CHECK(fp32_to_fp16(65504.0f) == 0x7BFF);
  CHECK(fp32_to_fp16(65519.0f) == 0x7BFF);
  CHECK(fp32_to_fp16(65520.0f) == 0x7C00);  // tie between 65504 and "65536" goes to even (inf)
  CHECK(fp32_to_fp16(INFINITY) == 0x7C00);
  CHECK(fp32_to_fp16(-INFINITY) == 0xFC00);
  CHECK(is_half_nan(fp32_to_fp16(NAN)));
  CHECK(fp32_to_fp16(std::ldexp(1.0f, -25)) == 0x0000);         // tie to even: 0
  CHECK(fp32_to_fp16(3 * std::ldexp(1.0f, -25)) == 0x0002);     // 1.5 ulp -> 2
  CHECK(fp32_to_fp16(1.0f + std::ldexp(1.0f, -11)) == 0x3C00);  // tie -> even mantissa 0
  CHECK(fp32_to_fp16(1.0f + 3 * std::ldexp(1.0f, -11)) == 0x3C02);
  CHECK(fp32_to_fp16(-0.0f) == 0x8000);
}

TEST_CASE("fp16 row conversions (F16C when available) agree bit for bit with the scalar ones") {
  // A strided sweep over all 2^32 float bit patterns (about 1M values) plus every half's neighbours.
  std::vector<float> values;
  for (uint64_t u = 0; u < (1ull << 32); u += 4099) values.push_back(from_bits(static_cast<uint32_t>(u)));
  for (uint32_t h = 0; h < 65536; ++h) {
    const float f = fp16_to_fp32(static_cast<uint16_t>(h));
    uint32_t u;
    std::memcpy(&u, &f, sizeof u);
    for (int d = -2; d <= 2; ++d) values.push_back(from_bits(u + d));
    values.push_back(from_bits(u + 0x1000));  // exactly halfway to the next half
  }
  std::vector<uint16_t> rows(values.size());
  fp32_to_fp16_row(values.data(), rows.data(), static_cast<int64_t>(values.size()));
  size_t mismatches = 0;
  for (size_t i = 0; i < values.size(); ++i) {
    const uint16_t scalar = fp32_to_fp16(values[i]);
    const bool same = scalar == rows[i] || (is_half_nan(scalar) && is_half_nan(rows[i]));
    if (!same && mismatches++ < 5) {
      uint32_t u;
      std::memcpy(&u, &values[i], sizeof u);
      MESSAGE("float bits " << std::hex << u << ": scalar " << scalar << " row " << rows[i]);
    }
  }
  CHECK(mismatches == 0);

  std::vector<uint16_t> halves(65536);
  for (uint32_t h = 0; h < 65536; ++h) halves[h] = static_cast<uint16_t>(h);
  std::vector<float> floats(65536);
  fp16_to_fp32_row(halves.data(), floats.data(), 65536);
  for (uint32_t h = 0; h < 65536; ++h) {
    const float scalar = fp16_to_fp32(static_cast<uint16_t>(h));
    if (std::isnan(scalar)) {
      REQUIRE(std::isnan(floats[h]));
    } else {
      REQUIRE(std::memcmp(&scalar, &floats[h], sizeof scalar) == 0);
    }
  }
}

TEST_CASE("bf16 conversion rounds to nearest even and keeps NaN") {
  for (uint32_t h = 0; h < 65536; ++h) {
    const float f = bf16_to_fp32(static_cast<uint16_t>(h));
    if (std::isnan(f)) continue;
    REQUIRE(fp32_to_bf16(f) == h);
  }
  CHECK(fp32_to_bf16(1.0f) == 0x3F80);
  CHECK(fp32_to_bf16(from_bits(0x3F808000)) == 0x3F80);  // tie, even stays
  CHECK(fp32_to_bf16(from_bits(0x3F818000)) == 0x3F82);  // tie, odd rounds up
  CHECK(fp32_to_bf16(from_bits(0x3F808001)) == 0x3F81);
  CHECK(std::isnan(bf16_to_fp32(fp32_to_bf16(NAN))));
  for (uint64_t u = 0; u < (1ull << 32); u += 65521) {
    const float f = from_bits(static_cast<uint32_t>(u));
    if (std::isnan(f) || std::fabs(f) < 1.2e-38f) continue;  // bf16 subnormals keep fewer bits
    const float back = bf16_to_fp32(fp32_to_bf16(f));
    if (std::isinf(back) && !std::isinf(f)) continue;  // rounded past the largest finite bf16
    REQUIRE(std::fabs(back - f) <= std::fabs(f) * (1.0f / 256));
  }
}
