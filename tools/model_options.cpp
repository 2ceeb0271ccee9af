#include "tools/model_options.h"

#include <cstdio>

#include "core/synth/demo_model.h"

namespace ember::cli {

void ModelOptions::add_to(CLI::App& sub) {
  auto* m = sub.add_option("-m,--model", model_path,
                           demo_if_missing ? "Model file (GGUF); default: the built-in demo model (synthetic)"
                                           : "Model file (GGUF)");
  m->check(CLI::ExistingFile);
  if (!demo_if_missing) m->required();
  sub.add_option("-t,--threads", threads, "Worker threads (default: one per physical core)")
      ->check(CLI::Range(0, 1024));
  sub.add_option("-c,--ctx-size", ctx_size,
                 "Context window in tokens (default: the model's training context, at most 4096)")
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 24));
  sub.add_option("-b,--batch-size", batch, "Prompt tokens evaluated per forward step (default 512)")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 16));
  sub.add_flag("--no-mmap", no_mmap, "Read the weights into memory instead of mapping the file");
  sub.add_flag("--no-repack", no_repack,
               "Do not keep interleaved copies of Q4_0 matrices (saves their size in memory, slower matmuls)");
}

std::string ModelOptions::resolve_model_path() const {
  if (!model_path.empty()) return model_path;
  bool created = false;
  std::string path = synth::ensure_demo_model(&created);
  std::fprintf(stderr, "ember: no model given (-m); %s the built-in demo model %s (synthetic weights, not a real language model)\n",
               created ? "created" : "using", path.c_str());
  return path;
}

ModelLoadOptions ModelOptions::load_options() const {
  ModelLoadOptions o;
  o.load = no_mmap ? WeightLoad::Read : WeightLoad::Mmap;
  o.repack = !no_repack;
  return o;
}

ContextOptions ModelOptions::context_options() const {
  ContextOptions o;
  o.n_ctx = ctx_size;
  o.max_batch = batch;
  return o;
}

}  // namespace ember::cli
