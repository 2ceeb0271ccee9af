#pragma once
// The tiny synthetic model the daemon's tests run on, written once per test process into a
// private temporary folder that is removed when the process exits.
#include <cstdint>
#include <filesystem>
#include <string>
#include <system_error>
#include <unistd.h>

#include "core/cache/budget_planner.h"
#include "core/model/model.h"
#include "core/synth/synth_writer.h"
#include "tests/support/scratch_dir.h"

namespace ember::test_server {

inline const std::filesystem::path& test_dir() { return test::scratch_dir("ember-server-test"); }

inline const std::string& tiny_model_path() {
  static const std::string path = [] {
    synth::SynthOptions o;
    o.preset = "tiny";
    o.type = GgmlType::Q8_0;
    o.output_path = (test_dir() / "tiny.gguf").string();
    o.threads = 2;
    synth::write_synth_model(o);
    return o.output_path;
  }();
  return path;
}

// The tiny synthetic preset with a dReLU FFN and PowerInfer predictors (as tests/sparse does).
inline const std::string& drelu_predictor_model_path() {
  static const std::string path = [] {
    synth::SynthOptions o;
    o.preset = "tiny";
    o.type = GgmlType::Q8_0;
    o.activation = FfnActivation::DReLU;
    o.predictor = true;
    o.threads = 2;
    o.output_path = (test_dir() / "tiny-drelu-predictor.gguf").string();
    synth::write_synth_model(o);
    return o.output_path;
  }();
  return path;
}

// The tiny mixture-of-experts preset (8 SiLU experts, 2 used per token).
inline const std::string& moe_tiny_model_path() {
  static const std::string path = [] {
    synth::SynthOptions o;
    o.preset = "moe-tiny";
    o.type = GgmlType::Q8_0;
    o.threads = 2;
    o.output_path = (test_dir() / "moe-tiny.gguf").string();
    synth::write_synth_model(o);
    return o.output_path;
  }();
  return path;
}

// The smallest memory budget a pack loads with (what cache::BudgetTooSmall reports for 1 byte).
inline uint64_t minimum_budget(const std::string& pack_path) {
  try {
    ModelLoadOptions probe;
    probe.offload.budget_bytes = 1;
    Model::load(pack_path, probe);
  } catch (const cache::BudgetTooSmall& e) {
    return e.minimum_bytes();
  }
  return 0;
}

}  // namespace ember::test_server
