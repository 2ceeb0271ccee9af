// The reader on real files from the shared fixtures (skipped, visibly, when they are absent).
#include <doctest/doctest.h>

#include <cstring>
#include <vector>

#include "core/gguf/gguf_file.h"
#include "tests/support/fixtures.h"

using ember::GgmlType;
using ember::gguf::GgufFile;
using ember::gguf::TensorInfo;

namespace {

void check_shape(const GgufFile& g, const char* name, GgmlType type, std::vector<uint64_t> ne) {
  INFO("tensor ", name);
  const TensorInfo* t = g.find_tensor(name);
  REQUIRE(t != nullptr);
  CHECK(t->type == type);
  REQUIRE(t->n_dims == ne.size());
  for (size_t d = 0; d < ne.size(); ++d) CHECK(t->ne[d] == ne[d]);
  for (size_t d = ne.size(); d < 4; ++d) CHECK(t->ne[d] == 1);
}

std::vector<uint8_t> read_bytes(const GgufFile& g, const TensorInfo& t) {
  std::vector<uint8_t> bytes(t.n_bytes);
  g.read_tensor(t, bytes.data());
  return bytes;
}

// Every tensor read and mapped gives the same bytes.
void check_read_matches_map(const GgufFile& g) {
  for (const TensorInfo& t : g.tensors()) {
    INFO("tensor ", t.name);
    const std::vector<uint8_t> read = read_bytes(g, t);
    const ember::io::MappedRegion mapped = g.map_tensor(t);
    REQUIRE(mapped.size() == t.n_bytes);
    CHECK(std::memcmp(read.data(), mapped.data(), t.n_bytes) == 0);
  }
}

}  // namespace

TEST_CASE("gguf fixture: stories260K (GGUF v3, F32)" * ember::test::needs_fixtures) {
  auto path = ember::test::fixture("models/stories260K.gguf");
  if (!path) return;
  const GgufFile g = GgufFile::open(path->string());
  CHECK(g.version() == 3);
  CHECK_FALSE(g.is_powerinfer());
  CHECK(g.alignment() == 32);
  CHECK(g.data_offset() % 32 == 0);
  const auto& md = g.metadata();
  CHECK(md.get_string("general.architecture") == "llama");
  CHECK(md.get_uint("llama.block_count") == 5u);
  CHECK(md.get_uint("llama.embedding_length") == 64u);
  CHECK(md.get_uint("llama.feed_forward_length") == 172u);
  CHECK(md.get_uint("llama.attention.head_count") == 8u);
  CHECK(md.get_uint("llama.attention.head_count_kv") == 4u);
  CHECK(md.get_float("llama.attention.layer_norm_rms_epsilon").value() == doctest::Approx(1e-5));
  CHECK_FALSE(md.contains("general.alignment"));
  const auto* tokens = md.get_string_array("tokenizer.ggml.tokens");
  REQUIRE(tokens != nullptr);
  CHECK(tokens->size() == 512);
  CHECK((*tokens)[0] == "<unk>");
  CHECK(md.get_float_array("tokenizer.ggml.scores")->size() == 512);
  CHECK(md.get_int_array("tokenizer.ggml.token_type")->size() == 512);

  CHECK(g.tensors().size() == 48);  // 9 per layer x 5 + embedding, output norm, output
  check_shape(g, "token_embd.weight", GgmlType::F32, {64, 512});
  check_shape(g, "blk.0.attn_k.weight", GgmlType::F32, {64, 32});
  check_shape(g, "blk.4.ffn_down.weight", GgmlType::F32, {172, 64});
  check_shape(g, "output_norm.weight", GgmlType::F32, {64});
  CHECK(g.find_tensor("blk.5.attn_q.weight") == nullptr);
  const TensorInfo* embd = g.find_tensor("token_embd.weight");
  CHECK(embd->n_bytes == 64 * 512 * 4);
  CHECK(embd->rows() == 512);
  CHECK(embd->row_bytes() == 256);
  CHECK(embd->offset == g.data_offset());  // the first tensor starts the data section
  check_read_matches_map(g);
}

TEST_CASE("gguf fixture: stories260K-v1 (GGUF v1) holds the same weights as the v3 file" *
          ember::test::needs_fixtures) {
  auto v1_path = ember::test::fixture("models/stories260K-v1.gguf");
  auto v3_path = ember::test::fixture("models/stories260K.gguf");
  if (!v1_path || !v3_path) return;
  const GgufFile v1 = GgufFile::open(v1_path->string());
  const GgufFile v3 = GgufFile::open(v3_path->string());
  CHECK(v1.version() == 1);
  CHECK(v1.metadata().get_uint("llama.block_count") == 5u);
  CHECK(v1.metadata().get_uint("llama.context_length") == 512u);
  CHECK(v1.metadata().get_string_array("tokenizer.ggml.tokens")->size() == 512);
  REQUIRE(v1.tensors().size() == v3.tensors().size());
  for (const TensorInfo& t : v1.tensors()) {
    INFO("tensor ", t.name);
    const TensorInfo* other = v3.find_tensor(t.name);
    REQUIRE(other != nullptr);
    CHECK(other->ne == t.ne);
    CHECK(other->n_bytes == t.n_bytes);
  }
  // The embedding table is the same in both files, whatever the order of the tensors.
  CHECK(read_bytes(v1, *v1.find_tensor("token_embd.weight")) == read_bytes(v3, *v3.find_tensor("token_embd.weight")));
  check_read_matches_map(v1);
}

TEST_CASE("gguf fixture: llama-2-tiny-random (F16 matrices, 32000-token vocab)" *
          ember::test::needs_fixtures) {
  auto path = ember::test::fixture("models/llama-2-tiny-random.gguf");
  if (!path) return;
  const GgufFile g = GgufFile::open(path->string());
  const auto& md = g.metadata();
  CHECK(md.get_uint("llama.block_count") == 1u);
  CHECK(md.get_uint("general.file_type") == 1u);
  CHECK(md.get_string_array("tokenizer.ggml.tokens")->size() == 32000);
  check_shape(g, "token_embd.weight", GgmlType::F16, {8, 32000});
  check_shape(g, "blk.0.ffn_down.weight", GgmlType::F16, {32, 8});
  check_shape(g, "blk.0.attn_norm.weight", GgmlType::F32, {8});
  CHECK(g.find_tensor("output.weight")->n_bytes == 8 * 32000 * 2);
  check_read_matches_map(g);
}

TEST_CASE("gguf fixture: vocab-only files (no tensors, no trailing padding)" * ember::test::needs_fixtures) {
  auto dir = ember::test::fixtures_dir();
  if (!dir) {
    ember::test::skip("fixture vocab/*.gguf not found");
    return;
  }
  const GgufFile spm = GgufFile::open((*dir / "vocab" / "ggml-vocab-llama-spm.gguf").string());
  CHECK(spm.tensors().empty());
  CHECK(spm.metadata().get_string("tokenizer.ggml.model") == "llama");
  CHECK(spm.metadata().get_string_array("tokenizer.ggml.tokens")->size() == 32000);
  CHECK(spm.metadata().get_bool("tokenizer.ggml.add_bos_token").has_value());

  for (const char* name : {"gpt-2", "falcon", "mpt", "starcoder", "deepseek-coder", "deepseek-llm", "refact", "phi-3"}) {
    INFO("vocab ", name);
    const GgufFile g = GgufFile::open((*dir / "vocab" / ("ggml-vocab-" + std::string(name) + ".gguf")).string());
    CHECK(g.tensors().empty());
    CHECK(g.metadata().get_string("tokenizer.ggml.model").has_value());
    CHECK(g.metadata().get_string_array("tokenizer.ggml.tokens")->size() > 0);
  }
}
