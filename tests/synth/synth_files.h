#pragma once
// Writing synthetic models to temporary files in the tests of tests/synth.
#include <doctest/doctest.h>

#include <cstdint>
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

// Options writing `preset` to the temporary file `file` on 2 threads.
inline synth::SynthOptions test_options(const std::string& preset, const std::string& file, GgmlType type,
                                        uint64_t seed, FfnActivation activation = FfnActivation::SiLU,
                                        bool predictor = false) {
  synth::SynthOptions o;
  o.preset = preset;
  o.type = type;
  o.seed = seed;
  o.threads = 2;
  o.activation = activation;
  o.predictor = predictor;
  o.output_path = synth_temp_path(file);
  return o;
}

inline uint64_t fnv1a(const std::vector<char>& bytes) {
  uint64_t h = 0xCBF29CE484222325ull;
  for (char c : bytes) h = (h ^ static_cast<unsigned char>(c)) * 0x100000001B3ull;
  return h;
}

// Writes `preset` (Q8_0) with seed 5 on 1 and on 3 threads and with seed 6 on 2: the first two
// must be the same bytes, the third as long but different.
inline void check_seed_determinism(const std::string& preset, size_t min_bytes,
                                   FfnActivation activation = FfnActivation::SiLU, bool predictor = false) {
  std::vector<std::string> paths;
  for (const auto& [seed, threads] : {std::pair{5, 1}, std::pair{5, 3}, std::pair{6, 2}}) {
    auto o = test_options(preset, preset + "_seed" + std::to_string(paths.size()) + ".gguf", GgmlType::Q8_0,
                          static_cast<uint64_t>(seed), activation, predictor);
    o.threads = threads;
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
