#include "tools/model_options.h"

namespace ember::cli {

void ModelOptions::add_to(CLI::App& sub) {
  sub.add_option("-m,--model", model_path, "Model file (GGUF)")->required()->check(CLI::ExistingFile);
  sub.add_option("-t,--threads", threads, "Worker threads (default: one per physical core)")
      ->check(CLI::Range(0, 1024));
  sub.add_option("-c,--ctx-size", ctx_size,
                 "Context window in tokens (default: the model's training context, at most 4096)")
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 24));
  sub.add_option("-b,--batch-size", batch, "Prompt tokens evaluated per forward step (default 512)")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 16));
  sub.add_flag("--no-mmap", no_mmap, "Read the weights into memory instead of mapping the file");
}

ModelLoadOptions ModelOptions::load_options() const {
  ModelLoadOptions o;
  o.load = no_mmap ? WeightLoad::Read : WeightLoad::Mmap;
  return o;
}

ContextOptions ModelOptions::context_options() const {
  ContextOptions o;
  o.n_ctx = ctx_size;
  o.max_batch = batch;
  return o;
}

}  // namespace ember::cli
