#pragma once
// Helpers for the pack tests: packing a test model with a chosen bundle order, rewriting a pack
// with one defect, flipping a byte in a file.
#include <doctest/doctest.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <functional>
#include <numeric>
#include <string>
#include <vector>

#include "core/gguf/gguf_file.h"
#include "core/gguf/gguf_writer.h"
#include "core/pack/pack_writer.h"
#include "core/synth/synth_writer.h"
#include "tests/sparse/sparse_model_builder.h"

namespace ember::test {

inline std::filesystem::path temp_path(const std::string& name) {
  return std::filesystem::temp_directory_path() / (name + "-" + std::to_string(::getpid()) + ".gguf");
}

// A tiny TurboSparse-like synthetic model: drelu, Q4_0, predictor, ffn_down_t; written to the temp
// path named after `name`.
inline synth::SynthOptions tiny_turbosparse_synth(const std::string& name) {
  synth::SynthOptions s;
  s.preset = "tiny";
  s.type = GgmlType::Q4_0;
  s.activation = FfnActivation::DReLU;
  s.predictor = true;
  s.down_transposed = true;
  s.threads = 2;
  s.output_path = temp_path(name).string();
  synth::write_synth_model(s);
  return s;
}

// Every layer's bundles in reverse neuron order (a non-identity permutation the tests can predict).
inline std::vector<std::vector<int32_t>> reversed_orders(int64_t n_layer, int64_t n_ff) {
  std::vector<std::vector<int32_t>> orders(static_cast<size_t>(n_layer), std::vector<int32_t>(static_cast<size_t>(n_ff)));
  for (auto& o : orders) std::iota(o.rbegin(), o.rend(), 0);
  return orders;
}

inline std::filesystem::path make_pack(const std::filesystem::path& source, const std::string& name,
                                       std::vector<std::vector<int32_t>> order = {},
                                       const ActivationProfile* profile = nullptr) {
  pack::PackOptions o;
  o.source_path = source.string();
  o.output_path = temp_path(name).string();
  o.order = std::move(order);
  o.profile = profile;
  pack::write_pack(o);
  return o.output_path;
}

// A test model and its pack with every layer's bundles in reversed order, written as temp files
// named after `name` ("<name>-src" and "<name>") and removed when this goes out of scope, also
// when a REQUIRE ends the test early.
struct SourceAndPack {
  SourceAndPack(const SparseModelSpec& spec, const std::string& name)
      : src(write_sparse_model(spec, name + "-src")),
        pk(make_pack(src, name, reversed_orders(spec.n_layer, spec.n_ff))) {}
  ~SourceAndPack() {
    std::filesystem::remove(src);
    std::filesystem::remove(pk);
  }
  SourceAndPack(const SourceAndPack&) = delete;
  SourceAndPack& operator=(const SourceAndPack&) = delete;
  std::filesystem::path src, pk;
};

// Copies a GGUF, letting `edit_metadata` change the metadata list and `edit_tensor` change or drop
// (return false) a tensor's bytes. Types and shapes are copied as they are.
struct Rewrite {
  std::function<void(std::vector<std::pair<std::string, gguf::Value>>&)> edit_metadata;
  std::function<bool(const gguf::TensorInfo&, std::vector<uint8_t>&)> edit_tensor;
};

inline std::filesystem::path rewrite_gguf(const std::filesystem::path& in, const std::string& name, const Rewrite& r) {
  const gguf::GgufFile f = gguf::GgufFile::open(in.string());
  std::vector<std::pair<std::string, gguf::Value>> md = f.metadata().entries();
  if (r.edit_metadata) r.edit_metadata(md);
  gguf::GgufWriter w;
  w.set_powerinfer_magic(f.is_powerinfer());
  w.set_alignment(f.alignment());
  for (const auto& [k, v] : md) {
    if (k != "general.alignment") w.add_value(k, v);
  }
  std::vector<std::pair<const gguf::TensorInfo*, std::vector<uint8_t>>> kept;
  for (const gguf::TensorInfo& t : f.tensors()) {
    std::vector<uint8_t> bytes(static_cast<size_t>(t.n_bytes));
    f.read_tensor(t, bytes.data());
    if (r.edit_tensor && !r.edit_tensor(t, bytes)) continue;
    kept.emplace_back(&t, std::move(bytes));
  }
  for (const auto& [t, bytes] : kept) w.add_tensor(t->name, t->type, std::vector<uint64_t>(t->ne.begin(), t->ne.begin() + t->n_dims));
  const auto out = temp_path(name);
  w.begin(out.string());
  for (const auto& [t, bytes] : kept) w.write_tensor_data(bytes.data(), bytes.size());
  w.finish();
  return out;
}

inline void set_uint(std::vector<std::pair<std::string, gguf::Value>>& md, const std::string& key, uint64_t v) {
  for (auto& [k, value] : md) {
    if (k == key) value.data = v;
  }
}

inline void flip_byte(const std::filesystem::path& path, uint64_t offset) {
  std::FILE* f = std::fopen(path.string().c_str(), "r+b");
  REQUIRE(f != nullptr);
  std::fseek(f, static_cast<long>(offset), SEEK_SET);
  const int c = std::fgetc(f);
  std::fseek(f, static_cast<long>(offset), SEEK_SET);
  std::fputc(c ^ 0x5A, f);
  std::fclose(f);
}

inline std::vector<uint8_t> read_file_bytes(const std::filesystem::path& path) {
  std::vector<uint8_t> bytes(std::filesystem::file_size(path));
  std::FILE* f = std::fopen(path.string().c_str(), "rb");
  REQUIRE(f != nullptr);
  REQUIRE(std::fread(bytes.data(), 1, bytes.size(), f) == bytes.size());
  std::fclose(f);
  return bytes;
}

// Rewrites the file in place (the same inode: descriptors open on it see the new bytes).
inline void write_file_bytes(const std::filesystem::path& path, const std::vector<uint8_t>& bytes) {
  std::FILE* f = std::fopen(path.string().c_str(), "r+b");
  REQUIRE(f != nullptr);
  REQUIRE(std::fwrite(bytes.data(), 1, bytes.size(), f) == bytes.size());
  std::fclose(f);
}

}  // namespace ember::test
