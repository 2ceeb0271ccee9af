// `ember pack`: writes a neuron-bundle pack of a model (docs/pack-format.md), or with --verify
// checks a pack against its source bundle by bundle. The work is in core/pack; this file maps
// flags and prints progress (stderr) and the summary (stdout).
#include <cstdio>
#include <memory>
#include <stdexcept>
#include <string>

#include "core/pack/pack_verify.h"
#include "core/pack/pack_writer.h"
#include "tools/subcommands.h"

namespace ember::cli {
namespace {

struct PackFlags {
  std::string model_path;
  std::string profile_path;
  std::string output;
  bool verify = false;
  std::string pack_path;  // --verify: the pack to check
  bool quiet = false;
};

int run_pack(const PackFlags& f) {
  pack::PackOptions o;
  o.source_path = f.model_path;
  o.output_path = f.output;
  ActivationProfile profile;
  if (!f.profile_path.empty()) {
    profile = load_activation_profile(f.profile_path);
    o.profile = &profile;
  }
  if (!f.quiet) {
    o.on_layer = [](int64_t done, int64_t n) { std::fprintf(stderr, "pack: layer %lld/%lld\n", (long long)done, (long long)n); };
  }
  const pack::PackResult r = pack::write_pack(o);
  const pack::BundleLayout& b = r.layout;
  const std::string experts = r.n_expert > 0 ? " x " + std::to_string(r.n_expert) + " experts" : "";
  std::printf("wrote %s: %lld layers%s x %lld bundles of %llu bytes (gate %s, up %s, down %s%s), order %s, %.1f MB in %.1f s\n",
              f.output.c_str(), (long long)r.n_layer, experts.c_str(), (long long)r.n_ff, (unsigned long long)b.bundle_bytes,
              std::string(type_name(b.gate_type)).c_str(), std::string(type_name(b.up_type)).c_str(),
              std::string(type_name(b.down_type)).c_str(), r.down_from_down_t ? " from ffn_down_t" : "",
              f.profile_path.empty() ? "identity (no profile)" : "hottest first", static_cast<double>(r.file_bytes) / 1e6,
              r.seconds);
  return 0;
}

int run_verify(const PackFlags& f) {
  std::function<void(int64_t, int64_t)> progress;
  if (!f.quiet) {
    progress = [](int64_t done, int64_t n) { std::fprintf(stderr, "verify: layer %lld/%lld\n", (long long)done, (long long)n); };
  }
  const pack::VerifyReport r = pack::verify_pack(f.model_path, f.pack_path, progress);
  std::printf("%s: %llu metadata keys, %llu tensors, %llu bundles checked against %s: %llu mismatch%s\n",
              f.pack_path.c_str(), (unsigned long long)r.metadata_checked, (unsigned long long)r.tensors_checked,
              (unsigned long long)r.bundles_checked, f.model_path.c_str(), (unsigned long long)r.mismatches,
              r.mismatches == 1 ? "" : "es");
  for (const std::string& m : r.first_mismatches) std::printf("  %s\n", m.c_str());
  if (r.mismatches > r.first_mismatches.size()) {
    std::printf("  ... and %llu more\n", (unsigned long long)(r.mismatches - r.first_mismatches.size()));
  }
  return r.ok() ? 0 : 1;
}

}  // namespace

void register_pack(CLI::App& app, int& exit_code) {
  auto f = std::make_shared<PackFlags>();
  CLI::App* sub = app.add_subcommand("pack", "Write a model's FFN as neuron bundles (hottest first), or verify a pack");
  sub->description(
      "Write a neuron-bundle pack: every FFN neuron's gate row, up row and down column stored together, bundles "
      "ordered hottest first by an `ember profile` profile, 4 KiB aligned; Ember runs packs like plain models. "
      "With --verify, check a pack against its source bundle by bundle (exit 1 on a mismatch).\n"
      "  ember pack -m MODEL [--profile PROFILE] -o OUT\n"
      "  ember pack --verify -m MODEL PACK");
  sub->add_option("-m,--model", f->model_path, "The source model (a plain GGUF or PowerInfer file)")
      ->required()
      ->check(CLI::ExistingFile);
  auto* profile = sub->add_option("--profile", f->profile_path, "Activation profile from `ember profile` (bundle order)")
                      ->check(CLI::ExistingFile);
  auto* out = sub->add_option("-o,--output", f->output, "The pack to write");
  auto* verify = sub->add_flag("--verify", f->verify, "Check PACK against the model instead of writing");
  auto* pack_path = sub->add_option("pack", f->pack_path, "With --verify: the pack to check")->check(CLI::ExistingFile);
  sub->add_flag("-q,--quiet", f->quiet, "No per-layer progress on stderr");
  verify->excludes(out)->excludes(profile);
  pack_path->needs(verify);
  sub->callback([f, &exit_code] {
    if (f->verify) {
      if (f->pack_path.empty()) throw CLI::ValidationError("--verify", "needs the pack to check: ember pack --verify -m MODEL PACK");
      exit_code = run_verify(*f);
    } else {
      if (f->output.empty()) throw CLI::ValidationError("-o", "the pack to write is required (or --verify PACK)");
      exit_code = run_pack(*f);
    }
  });
}

}  // namespace ember::cli
