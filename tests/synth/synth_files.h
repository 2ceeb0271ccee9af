#pragma once
// Writing synthetic models to temporary files in the tests of tests/synth.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "core/synth/synth_writer.h"

namespace ember::test {

inline std::string synth_temp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() / ("ember_test_synth_" + name)).string();
}

inline std::vector<char> file_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// Writes `preset` (Q8_0) with seed 5 on 1 and on 3 threads and with seed 6 on 2: the first two
// must be the same bytes, the third as long but different.
inline void check_seed_determinism(const std::string& preset, size_t min_bytes) {
  std::vector<std::string> paths;
  for (const auto& [seed, threads] : {std::pair{5, 1}, std::pair{5, 3}, std::pair{6, 2}}) {
    synth::SynthOptions o;
    o.preset = preset;
    o.type = GgmlType::Q8_0;
    o.seed = static_cast<uint64_t>(seed);
    o.threads = threads;
    o.output_path = synth_temp_path(preset + "_seed" + std::to_string(paths.size()) + ".gguf");
    synth::write_synth_model(o);
    paths.push_back(o.output_path);
  }
  const auto a = file_bytes(paths[0]), b = file_bytes(paths[1]), c = file_bytes(paths[2]);
  CHECK(a.size() > min_bytes);
  CHECK(a == b);
  CHECK(a.size() == c.size());
  CHECK(a != c);
  for (const auto& p : paths) std::filesystem::remove(p);
}

}  // namespace ember::test
