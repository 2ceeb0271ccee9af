#include <doctest/doctest.h>

#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include "core/gguf/gguf_file.h"
#include "core/synth/synth_shape.h"
#include "core/synth/synth_weights.h"
#include "core/synth/synth_writer.h"
#include "core/tokenizer/tokenizer.h"
#include "tests/support/fixtures.h"
#include "tests/synth/synth_files.h"

using namespace ember;
using namespace ember::synth;

namespace {
std::string temp_path(const std::string& name) { return ember::test::synth_temp_path(name); }
std::string write_tiny(const std::string& name, GgmlType type, uint64_t seed, int threads = 2) {
  SynthOptions o;
  o.preset = "tiny";
  o.type = type;
  o.seed = seed;
  o.threads = threads;
  o.output_path = temp_path(name);
  write_synth_model(o);
  return o.output_path;
}
}  // namespace

TEST_CASE("presets have the documented shapes") {
  const auto b1 = preset_shape("1b");
  CHECK(parameter_count(b1) > 1'000'000'000ull);
  CHECK(parameter_count(b1) < 1'200'000'000ull);
  const auto m7 = preset_shape("mistral-7b");
  CHECK(m7.kv_dim() == 1024);
  CHECK(m7.rope_theta == 1e6f);
  CHECK(parameter_count(m7) > 7'000'000'000ull);
  CHECK_THROWS_AS(preset_shape("huge"), std::invalid_argument);
  ModelShape bad = preset_shape("tiny");
  bad.dim = 320;
  bad.n_heads = 5;
  bad.n_kv_heads = 5;
  CHECK_THROWS_AS(model_tensors(bad), std::invalid_argument);
}

TEST_CASE("rows do not depend on how they are split") {
  const auto tensors = model_tensors(preset_shape("tiny"));
  const TensorSpec& q = tensors[2];
  REQUIRE(q.name == "blk.0.attn_q.weight");
  const uint64_t n = q.ne[0];
  std::vector<float> all(4 * n), part(2 * n);
  generate_rows(q, 7, 0, 4, all.data());
  generate_rows(q, 7, 2, 4, part.data());
  CHECK(std::equal(part.begin(), part.end(), all.begin() + static_cast<long>(2 * n)));
  double sum = 0, sq = 0;
  for (float x : all) sum += x, sq += double(x) * x;
  const double mean = sum / double(all.size()), std = std::sqrt(sq / double(all.size()) - mean * mean);
  CHECK(std::abs(mean) < 0.01);
  CHECK(std == doctest::Approx(weight_std(q)).epsilon(0.05));
}

TEST_CASE("the tiny model is a llama GGUF with the expected metadata and tensors") {
  const auto path = write_tiny("meta.gguf", GgmlType::Q4_0, 1);
  const auto f = gguf::GgufFile::open(path);
  const auto& md = f.metadata();
  CHECK(f.version() == 3);
  CHECK(md.get_string("general.architecture") == "llama");
  CHECK(md.get_uint("general.file_type") == 2u);
  CHECK(md.get_uint("llama.embedding_length") == 256u);
  CHECK(md.get_uint("llama.block_count") == 2u);
  CHECK(md.get_uint("llama.feed_forward_length") == 768u);
  CHECK(md.get_uint("llama.attention.head_count") == 4u);
  CHECK(md.get_uint("llama.attention.head_count_kv") == 2u);
  CHECK(md.get_uint("llama.rope.dimension_count") == 64u);
  CHECK(md.get_uint("llama.vocab_size") == 1024u);
  CHECK(md.get_float("llama.attention.layer_norm_rms_epsilon").value() == doctest::Approx(1e-5));
  CHECK(md.get_string("tokenizer.ggml.model") == "llama");
  REQUIRE(md.get_string_array("tokenizer.ggml.tokens") != nullptr);
  CHECK(md.get_string_array("tokenizer.ggml.tokens")->size() == 1024u);
  CHECK(md.get_uint("tokenizer.ggml.bos_token_id") == 1u);
  CHECK(md.get_bool("tokenizer.ggml.add_bos_token") == true);

  CHECK(f.tensors().size() == 1 + 2 * 9 + 2);
  const auto* embd = f.find_tensor("token_embd.weight");
  REQUIRE(embd != nullptr);
  CHECK(embd->type == GgmlType::Q4_0);
  CHECK(embd->ne[0] == 256);
  CHECK(embd->ne[1] == 1024);
  const auto* k = f.find_tensor("blk.1.attn_k.weight");
  REQUIRE(k != nullptr);
  CHECK(k->ne[1] == 128);
  const auto* down = f.find_tensor("blk.0.ffn_down.weight");
  REQUIRE(down != nullptr);
  CHECK(down->ne[0] == 768);
  CHECK(down->ne[1] == 256);
  const auto* norm = f.find_tensor("output_norm.weight");
  REQUIRE(norm != nullptr);
  CHECK(norm->type == GgmlType::F32);
  std::vector<float> w(256);
  f.read_tensor(*norm, w.data());
  for (float x : w) CHECK(std::abs(x - 1.0f) < 0.1f);
  std::filesystem::remove(path);
}

TEST_CASE("same seed gives the same bytes whatever the threads; another seed differs") {
  ember::test::check_seed_determinism("tiny", 1000000);
}

TEST_CASE("F16 and Q4_K models are written with their file types") {
  for (const auto& [type, file_type] : {std::pair{GgmlType::F16, 1u}, std::pair{GgmlType::Q4_K, 14u}}) {
    const auto path = write_tiny("t.gguf", type, 0);
    const auto f = gguf::GgufFile::open(path);
    CHECK(f.metadata().get_uint("general.file_type") == file_type);
    CHECK(f.find_tensor("blk.0.ffn_up.weight")->type == type);
    std::filesystem::remove(path);
  }
  SynthOptions o;
  o.type = GgmlType::Q5_1;
  o.output_path = temp_path("never.gguf");
  CHECK_THROWS_AS(write_synth_model(o), std::invalid_argument);
}

TEST_CASE("English text tokenizes into multi-letter pieces") {
  const auto path = write_tiny("tok.gguf", GgmlType::Q4_0, 0);
  const auto f = gguf::GgufFile::open(path);
  const auto tok = Tokenizer::from_gguf(f.metadata());
  const std::string text = "the little girl was in the house";
  const auto ids = tok.encode(text, false, false);
  CHECK(ids.size() < 16);  // 32 characters
  CHECK(tok.decode(ids) == text);
  // llama.cpp's tokenization of these prompts with the tiny vocabulary (node-llama-cpp 3.21.1),
  // which also pins the built-in vocabulary: a change to it shows up here.
  const std::vector<std::pair<std::string, std::vector<int32_t>>> llama_cpp = {
      {"Once upon a time there was a little girl", {496, 318, 421, 463, 261, 476, 427, 342, 261, 563, 793}},
      {"The house on the hill", {332, 796, 298, 268, 447, 281}},
      {"I think that people should", {333, 675, 334, 555, 838}},
      {"Water is", {294, 338, 274, 320}},
      {"In the morning the king went to the river", {462, 268, 273, 276, 943, 443, 268, 414, 443, 787, 292, 268, 380, 866}},
  };
  for (const auto& test_case : llama_cpp)  // no structured binding: clang 14 cannot capture one
    CHECK_MESSAGE(tok.encode(test_case.first, false, false) == test_case.second, test_case.first);
  std::filesystem::remove(path);
}

TEST_CASE("--vocab-from copies another model's tokenizer and sizes the model by it" *
          ember::test::needs_fixtures) {
  const auto source = ember::test::fixture("models/stories260K.gguf");
  if (!source) return;
  SynthOptions o;
  o.preset = "tiny";
  o.type = GgmlType::Q8_0;
  o.vocab_from = source->string();
  o.output_path = temp_path("vocab_from.gguf");
  const auto result = write_synth_model(o);
  CHECK(result.shape.n_vocab == 512);
  const auto f = gguf::GgufFile::open(o.output_path);
  const auto src = gguf::GgufFile::open(o.vocab_from);
  CHECK(*f.metadata().get_string_array("tokenizer.ggml.tokens") ==
        *src.metadata().get_string_array("tokenizer.ggml.tokens"));
  CHECK(f.metadata().get_uint("llama.vocab_size") == 512u);
  CHECK(f.find_tensor("output.weight")->ne[1] == 512);
  std::filesystem::remove(o.output_path);
}

TEST_CASE("--layers writes the preset's shape with fewer layers, drawing the same weights") {
  SynthOptions o;
  o.preset = "tiny";
  o.threads = 2;
  o.n_layers = 1;
  o.output_path = temp_path("one-layer.gguf");
  write_synth_model(o);
  const std::string full = write_tiny("two-layers.gguf", GgmlType::Q4_0, 0);
  const auto a = gguf::GgufFile::open(o.output_path);
  const auto b = gguf::GgufFile::open(full);
  CHECK(a.metadata().get_uint("llama.block_count") == 1u);
  CHECK(a.find_tensor("blk.1.attn_q.weight") == nullptr);
  // Layer 0 draws the full model's weights (the residual-writing projections aside, which are
  // scaled for the depth).
  const auto* qa = a.find_tensor("blk.0.attn_q.weight");
  const auto* qb = b.find_tensor("blk.0.attn_q.weight");
  REQUIRE(qa != nullptr);
  REQUIRE(qb != nullptr);
  REQUIRE(qa->n_bytes == qb->n_bytes);
  std::vector<uint8_t> ba(qa->n_bytes), bb(qb->n_bytes);
  a.read_tensor(*qa, ba.data());
  b.read_tensor(*qb, bb.data());
  CHECK(ba == bb);
  o.n_layers = -1;
  CHECK_THROWS_AS(write_synth_model(o), std::invalid_argument);
  std::filesystem::remove(o.output_path);
  std::filesystem::remove(full);
}
