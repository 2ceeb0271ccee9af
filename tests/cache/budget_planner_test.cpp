// cache::plan_budget and cache::parse_memory_budget: the greedy choice of hot neurons across layers
// by expected hits per byte, the cold-slot reserve, the minimum budget and its error, and parsing.
#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/cache/budget_planner.h"

using namespace ember::cache;

namespace {

LayerPlanInput layer(const std::vector<float>& freq, uint64_t bundle_bytes, uint32_t min_cold) {
  return LayerPlanInput{static_cast<uint32_t>(freq.size()), bundle_bytes, std::span<const float>(freq), min_cold};
}

std::string error_of(const BudgetPlanInput& in) {
  try {
    plan_budget(in);
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "";
}

std::string parse_error(const std::string& text, uint64_t file_bytes = 1000) {
  try {
    parse_memory_budget(text, file_bytes);
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("planner: hot neurons are taken across layers in order of frequency") {
  const std::vector<float> f0 = {0.9f, 0.5f, 0.1f, 0.0f};
  const std::vector<float> f1 = {0.8f, 0.7f, 0.2f, 0.0f};
  BudgetPlanInput in;
  in.resident_bytes = 10000;
  in.layers = {layer(f0, 4096, 1), layer(f1, 4096, 1)};
  // Reserve: one slot of 4096. Three hot bundles: 0.9 (layer 0), 0.8 and 0.7 (layer 1).
  in.budget_bytes = 10000 + 4096 + 3 * 4096;
  BudgetPlan plan = plan_budget(in);
  CHECK(plan.hot == std::vector<uint32_t>{1, 2});
  CHECK(plan.cold_slots == 1);
  CHECK(plan.slot_bytes == 4096);
  CHECK(plan.total_bytes == in.budget_bytes);
  CHECK(plan.minimum_bytes == 10000 + 4096);
  CHECK(plan.hot_activation_share == doctest::Approx((0.9 + 0.8 + 0.7) / 3.2));

  in.budget_bytes += 4096;  // the next hottest is layer 0's 0.5
  plan = plan_budget(in);
  CHECK(plan.hot == std::vector<uint32_t>{2, 2});

  in.budget_bytes += 4095;  // not enough for another bundle: no change, no extra slot
  plan = plan_budget(in);
  CHECK(plan.hot == std::vector<uint32_t>{2, 2});
  CHECK(plan.cold_slots == 1);
  CHECK(plan.total_bytes <= in.budget_bytes);
}

TEST_CASE("planner: locality_tokens moves bytes from hot prefixes to cold slots, up to half the room") {
  std::vector<float> f0(100), f1(100);
  for (size_t k = 0; k < 100; ++k) {
    f0[k] = 0.5f * std::pow(0.97f, static_cast<float>(k));
    f1[k] = 0.4f * std::pow(0.96f, static_cast<float>(k));
  }
  BudgetPlanInput in;
  in.resident_bytes = 1 << 20;
  in.layers = {layer(f0, 4096, 10), layer(f1, 4096, 10)};
  const uint64_t room = 100 * 4096;  // what the budget leaves after resident + reserve
  in.budget_bytes = in.resident_bytes + 10 * 4096 + room;
  const BudgetPlan plain = plan_budget(in);
  CHECK(plain.hot[0] + plain.hot[1] == 100);
  CHECK(plain.cold_slots == 10);

  in.locality_tokens = 4.0;
  const BudgetPlan local = plan_budget(in);
  CHECK(local.total_bytes <= in.budget_bytes);
  CHECK(local.minimum_bytes == plain.minimum_bytes);
  CHECK(local.hot[0] + local.hot[1] < 100);
  CHECK(local.cold_slots > 10);
  // The fixed point: the pool is about 4 tokens of the cold neurons' activations (the hot prefixes
  // are whole bundles, so within a few slots), and never more than the reserve + half the room.
  CHECK(local.cold_slots <= 10 + room / 2 / 4096 + 1);
  const double target = 4.0 * local.cold_activations_per_token;
  if (local.cold_slots < 10 + room / 2 / 4096) CHECK(std::fabs(static_cast<double>(local.cold_slots) - target) <= 3.0);
  CHECK(local.hot_activation_share < plain.hot_activation_share);

  in.locality_tokens = 1000.0;  // capped at half the room
  const BudgetPlan capped = plan_budget(in);
  CHECK(capped.hot_total_bytes >= room / 2);
  CHECK(capped.total_bytes <= in.budget_bytes);

  in.budget_bytes = in.resident_bytes + 200 * 4096;  // everything fits: locality changes nothing
  const BudgetPlan all = plan_budget(in);
  CHECK(all.hot == std::vector<uint32_t>{100, 100});
  CHECK(all.cold_slots == 0);

  in.budget_bytes = in.resident_bytes + 10 * 4096 + room;
  for (double bad : {-1.0, std::nan(""), std::numeric_limits<double>::infinity()}) {
    in.locality_tokens = bad;
    CHECK(error_of(in).find("locality_tokens must be a finite number >= 0") != std::string::npos);
  }
}

TEST_CASE("planner: expected hits per byte, not frequency alone") {
  const std::vector<float> big = {0.6f, 0.6f};    // 8 KiB bundles: 0.6 / 8192
  const std::vector<float> small = {0.4f, 0.4f};  // 4 KiB bundles: 0.4 / 4096 is more per byte
  BudgetPlanInput in;
  in.layers = {layer(big, 8192, 0), layer(small, 4096, 0)};
  in.budget_bytes = 2 * 4096;
  const BudgetPlan plan = plan_budget(in);
  CHECK(plan.hot == std::vector<uint32_t>{0, 2});
}

TEST_CASE("planner: ties spread evenly across layers (a pack without a profile)") {
  const std::vector<float> zeros(8, 0.0f);
  BudgetPlanInput in;
  in.layers = {layer(zeros, 4096, 0), layer(zeros, 4096, 0), layer(zeros, 4096, 0)};
  in.budget_bytes = 6 * 4096;
  const BudgetPlan plan = plan_budget(in);
  CHECK(plan.hot == std::vector<uint32_t>{2, 2, 2});
  CHECK(plan.hot_activation_share == 0.0);
}

TEST_CASE("planner: a budget exactly at the minimum runs; one byte less is an error naming the minimum") {
  const std::vector<float> f = {0.5f, 0.4f, 0.3f, 0.2f, 0.1f, 0.0f};
  BudgetPlanInput in;
  in.resident_bytes = 1 << 20;
  in.layers = {layer(f, 1000, 3), layer(f, 1000, 5)};  // slots of 1024 bytes; reserve = max(3, 5) = 5
  const uint64_t minimum = (1 << 20) + 5 * 1024;
  in.budget_bytes = minimum;
  BudgetPlan plan = plan_budget(in);
  CHECK(plan.minimum_bytes == minimum);
  CHECK(plan.hot == std::vector<uint32_t>{0, 0});
  CHECK(plan.cold_slots == 5);
  CHECK(plan.total_bytes == minimum);

  in.budget_bytes = minimum - 1;
  try {
    plan_budget(in);
    FAIL("no error");
  } catch (const BudgetTooSmall& e) {
    const std::string msg = e.what();
    CHECK(e.minimum_bytes() == minimum);
    CHECK(msg.find("minimum is " + std::to_string(minimum) + " bytes (1.0 MiB)") != std::string::npos);
    CHECK(msg.find("5 cold slots of 1024 bytes") != std::string::npos);
  }

  // Two layers pinned at once (prefetching the next layer): reserve = 5 + 3.
  in.pinned_layers = 2;
  in.budget_bytes = (1 << 20) + 8 * 1024;
  plan = plan_budget(in);
  CHECK(plan.cold_slots == 8);
  in.budget_bytes -= 1;
  CHECK_THROWS_AS(plan_budget(in), BudgetTooSmall);
}

TEST_CASE("planner: a budget holding everything makes every neuron hot and needs no slots") {
  const std::vector<float> f = {0.5f, 0.4f, 0.3f};
  BudgetPlanInput in;
  in.resident_bytes = 100;
  in.layers = {layer(f, 3456, 3), layer(f, 3456, 3)};
  // Each hot region is 3 * 3456 = 10368 bytes rounded up to 12288.
  in.budget_bytes = 100 + 2 * 12288;
  BudgetPlan plan = plan_budget(in);
  CHECK(plan.hot == std::vector<uint32_t>{3, 3});
  CHECK(plan.hot_bytes == std::vector<uint64_t>{12288, 12288});
  CHECK(plan.cold_slots == 0);
  CHECK(plan.hot_activation_share == doctest::Approx(1.0));
  CHECK(plan.minimum_bytes == 100 + 3 * 3456);  // resident + 3 cold slots

  // A cold reserve larger than the model (dense steps need every neuron): the minimum is the model.
  in.layers = {layer(f, 3456, 3), layer(f, 3456, 3)};
  in.pinned_layers = 4;  // clamped to the 2 layers: 6 slots of 3456 = 20736 < 24576
  CHECK(plan_budget(in).minimum_bytes == 100 + 6 * 3456);
  // Slots are sized for the largest bundle: 6 slots of 8192 exceed the whole model (24576 + 4096).
  const std::vector<float> g(3, 0.0f);
  in.layers = {layer(g, 8192, 3), layer(g, 64, 3)};
  in.budget_bytes = 100 + 24576 + 4096;
  plan = plan_budget(in);
  CHECK(plan.minimum_bytes == 100 + 24576 + 4096);
  CHECK(plan.hot == std::vector<uint32_t>{3, 3});
  CHECK(plan.cold_slots == 0);
}

TEST_CASE("planner: hot regions are rounded up to 4 KiB and the plan stays within the budget") {
  std::vector<float> f(1000);
  for (size_t i = 0; i < f.size(); ++i) f[i] = 1.0f - static_cast<float>(i) / 1000.0f;
  BudgetPlanInput in;
  in.resident_bytes = 12345;
  in.layers = {layer(f, 3456, 50), layer(f, 1000, 20), layer(f, 3500, 30)};
  for (uint64_t budget : {300000ull, 1000000ull, 2500000ull, 5000000ull}) {
    in.budget_bytes = budget;
    const BudgetPlan plan = plan_budget(in);
    CAPTURE(budget);
    CHECK(plan.total_bytes <= budget);
    CHECK(plan.slot_bytes == 3520);  // 3500 rounded up to 64
    uint64_t hot = 0;
    for (size_t l = 0; l < 3; ++l) {
      const uint64_t raw = plan.hot[l] * in.layers[l].bundle_bytes;
      CHECK(plan.hot_bytes[l] == (raw + 4095) / 4096 * 4096);
      hot += plan.hot_bytes[l];
    }
    CHECK(plan.hot_total_bytes == hot);
    CHECK(plan.cold_slots >= 50);
    // What is left is less than one more slot (or every cold neuron has a slot).
    CHECK(budget - plan.total_bytes < plan.slot_bytes + 3 * 4096);
  }
}

TEST_CASE("planner: bad input is refused naming the layer") {
  const std::vector<float> ok = {0.5f, 0.1f};
  const std::vector<float> rising = {0.1f, 0.5f};
  const std::vector<float> nan = {std::nanf(""), 0.1f};
  const std::vector<float> above = {1.5f, 0.1f};
  BudgetPlanInput in;
  in.budget_bytes = 1 << 30;
  CHECK(error_of(in).find("no layers") != std::string::npos);
  in.layers = {layer(ok, 4096, 1), layer(rising, 4096, 1)};
  CHECK(error_of(in).find("layer 1: frequency of bundle 1 exceeds bundle 0's: bundles must be ordered hottest first") !=
        std::string::npos);
  in.layers = {layer(nan, 4096, 1)};
  CHECK(error_of(in).find("layer 0: frequency of bundle 0 is not in [0, 1]") != std::string::npos);
  in.layers = {layer(above, 4096, 1)};
  CHECK(error_of(in).find("not in [0, 1]") != std::string::npos);
  in.layers = {layer(ok, 0, 1)};
  CHECK(error_of(in).find("bundle_bytes is 0") != std::string::npos);
  in.layers = {LayerPlanInput{3, 4096, std::span<const float>(ok), 1}};
  CHECK(error_of(in).find("2 frequencies for 3 neurons") != std::string::npos);
  in.layers = {layer(ok, std::numeric_limits<uint64_t>::max() / 2, 1)};
  CHECK(error_of(in).find("overflows") != std::string::npos);
}

TEST_CASE("budget parsing: sizes, bytes and percentages") {
  CHECK(parse_memory_budget("4G", 0) == 4ull << 30);
  CHECK(parse_memory_budget("512M", 0) == 512ull << 20);
  CHECK(parse_memory_budget("100K", 0) == 100ull << 10);
  CHECK(parse_memory_budget("100k", 0) == 100ull << 10);
  CHECK(parse_memory_budget("2T", 0) == 2ull << 40);
  CHECK(parse_memory_budget("4096", 0) == 4096);
  CHECK(parse_memory_budget("1.5G", 0) == 3ull << 29);
  CHECK(parse_memory_budget("4GiB", 0) == 4ull << 30);
  CHECK(parse_memory_budget("4GB", 0) == 4ull << 30);
  CHECK(parse_memory_budget("50%", 1000) == 500);
  CHECK(parse_memory_budget("12.5%", 1000) == 125);
  CHECK(parse_memory_budget("100%", 4109000000ull) == 4109000000ull);
  CHECK(parse_memory_budget("25%", 4109000001ull) == 1027250000ull);  // rounded down
  CHECK(parse_memory_budget("18446744073709551615", 0) == std::numeric_limits<uint64_t>::max());
}

TEST_CASE("budget parsing: junk, zero and overflow are clear errors") {
  CHECK(parse_error("").find("memory budget \"\": empty") == 0);
  CHECK(parse_error("abc").find("does not start with a number") != std::string::npos);
  CHECK(parse_error("-1G").find("does not start with a number") != std::string::npos);
  CHECK(parse_error(" 4G").find("does not start with a number") != std::string::npos);
  CHECK(parse_error("4G ").find("unknown suffix \"G \"") != std::string::npos);
  CHECK(parse_error("4X").find("unknown suffix \"X\"") != std::string::npos);
  CHECK(parse_error("4Gx").find("unknown suffix") != std::string::npos);
  CHECK(parse_error("4.G").find("needs digits after it") != std::string::npos);
  CHECK(parse_error("1.5").find("must be whole") != std::string::npos);
  CHECK(parse_error("0").find("is zero") != std::string::npos);
  CHECK(parse_error("0M").find("is zero") != std::string::npos);
  CHECK(parse_error("0%").find("is zero") != std::string::npos);
  CHECK(parse_error("0.01%", 10).find("is zero") != std::string::npos);  // rounds to 0 bytes
  CHECK(parse_error("101%").find("above 100%") != std::string::npos);
  CHECK(parse_error("50%", 0).find("needs the model file's size") != std::string::npos);
  CHECK(parse_error("18446744073709551616").find("too large") != std::string::npos);
  CHECK(parse_error("99999999999999999999999").find("too large") != std::string::npos);
  CHECK(parse_error("16777216T").find("too large") != std::string::npos);  // 2^24 * 2^40
  CHECK(parse_error("4Q").find("expected bytes, a size like 512M") != std::string::npos);
}
