#include "core/pack/pack_verify.h"

#include <algorithm>
#include <cstring>
#include <set>
#include <stdexcept>

#include "core/model/model.h"
#include "core/pack/pack_source.h"

namespace ember::pack {
namespace {

bool same_bits(double a, double b) { return std::memcmp(&a, &b, sizeof a) == 0; }

// Equal type and value; floats bit for bit (a NaN copied unchanged is still equal).
bool value_equal(const gguf::Value& a, const gguf::Value& b) {
  if (a.type != b.type || (a.type == gguf::ValueType::ARRAY && a.array_type != b.array_type)) return false;
  if (a.data.index() != b.data.index()) return false;
  if (const auto* x = std::get_if<double>(&a.data)) return same_bits(*x, std::get<double>(b.data));
  if (const auto* x = std::get_if<std::vector<double>>(&a.data)) {
    const auto& y = std::get<std::vector<double>>(b.data);
    if (x->size() != y.size()) return false;
    for (size_t i = 0; i < x->size(); ++i)
      if (!same_bits((*x)[i], y[i])) return false;
    return true;
  }
  return a.data == b.data;
}

class Checker {
 public:
  explicit Checker(VerifyReport& r) : r_(r) {}
  void mismatch(const std::string& what) {
    ++r_.mismatches;
    if (r_.first_mismatches.size() < VerifyReport::kMaxListed) r_.first_mismatches.push_back(what);
  }

 private:
  VerifyReport& r_;
};

std::string shape(const gguf::TensorInfo& t) {
  std::string s = std::string(type_name(t.type)) + " {";
  for (uint32_t i = 0; i < t.n_dims; ++i) s += (i ? ", " : "") + std::to_string(t.ne[i]);
  return s + "}";
}

void check_metadata(const gguf::GgufFile& src, const gguf::GgufFile& pk, VerifyReport& r, Checker& check) {
  std::set<std::string> expected;
  for (const auto& [key, value] : src.metadata().entries()) {
    if (key == "general.alignment") continue;
    expected.insert(key);
    ++r.metadata_checked;
    const gguf::Value* v = pk.metadata().find(key);
    if (v == nullptr) check.mismatch("metadata key '" + key + "' is missing from the pack");
    else if (!value_equal(value, *v)) check.mismatch("metadata key '" + key + "' differs from the source's");
  }
  for (const char* k : {kVersionKey, kBundleBytesKey, kGateTypeKey, kUpTypeKey, kDownTypeKey, kUpOffsetKey,
                        kDownOffsetKey, kProfileTokensKey, "general.alignment"})
    expected.insert(k);
  for (const auto& [key, value] : pk.metadata().entries()) {
    if (!expected.count(key)) check.mismatch("metadata key '" + key + "' is in the pack but not in the source");
  }
  if (pk.alignment() != kAlignment) {
    check.mismatch("general.alignment is " + std::to_string(pk.alignment()) + ", expected " + std::to_string(kAlignment));
  }
}

void check_unit(const Model& src, const Model& pk, int64_t unit, VerifyReport& r, Checker& check) {
  const FfnUnit S = ffn_unit(src, unit), P = ffn_unit(pk, unit);
  const BundleLayout& b = pk.weights().pack_info().layout;
  const SourceDownRows down(src, unit);
  const int64_t F = src.config().n_ff, l = S.layer;
  const std::string name = bundles_name(l) + (S.expert >= 0 ? " expert " + std::to_string(S.expert) : "");
  const std::string from_expert = S.expert >= 0 ? " of expert " + std::to_string(S.expert) : "";
  for (int64_t k = 0; k < F; ++k) {
    const int32_t i = P.neuron_perm[k];  // a permutation: checked when the pack loaded
    const uint8_t* bundle = matrix_row(P.gate, k);
    const struct {
      const char* part;
      const uint8_t* have;
      const uint8_t* want;
      uint64_t bytes;
      const char* from;
    } parts[] = {
        {"gate row", bundle, matrix_row(S.gate, i), b.gate_bytes, "ffn_gate row"},
        {"up row", bundle + b.up_offset, matrix_row(S.up, i), b.up_bytes, "ffn_up row"},
        {"down column", bundle + b.down_offset, down.row(i), b.down_bytes,
         src.weights().has_down_t() ? "ffn_down_t row" : "ffn_down column"},
    };
    for (const auto& p : parts) {
      if (std::memcmp(p.have, p.want, p.bytes) != 0) {
        check.mismatch(name + ": bundle " + std::to_string(k) + " (neuron " + std::to_string(i) + "): " + p.part +
                       " differs from blk." + std::to_string(l) + "." + p.from + " " + std::to_string(i) + from_expert);
      }
    }
    ++r.bundles_checked;
  }
}

void check_tensors(const Model& src, const Model& pk, VerifyReport& r, Checker& check) {
  const gguf::GgufFile& sf = src.file();
  const gguf::GgufFile& pf = pk.file();
  const int64_t n_layer = src.config().n_layer;
  std::set<std::string> expected;
  for (int64_t l = 0; l < n_layer; ++l) {
    expected.insert(bundles_name(l));
    expected.insert(perm_name(l));
    expected.insert(freq_name(l));
  }
  const int64_t per_layer = std::max<int64_t>(1, src.config().n_expert);
  for (const gguf::TensorInfo& t : sf.tensors()) {
    int64_t l = -1, e = -1;
    const SourceRole role = source_role(t.name, n_layer, &l, &e);
    if (role != SourceRole::Copy && role != SourceRole::Fc2) continue;
    expected.insert(t.name);
    ++r.tensors_checked;
    const gguf::TensorInfo* p = pf.find_tensor(t.name);
    if (p == nullptr) {
      check.mismatch("tensor '" + t.name + "' is missing from the pack");
      continue;
    }
    if (p->type != t.type || p->n_dims != t.n_dims || p->ne != t.ne) {
      check.mismatch("tensor '" + t.name + "' is " + shape(*p) + " in the pack, " + shape(t) + " in the source");
      continue;
    }
    const io::MappedRegion a = sf.map_tensor(t), b = pf.map_tensor(*p);
    if (role == SourceRole::Copy) {
      if (std::memcmp(a.data(), b.data(), t.n_bytes) != 0) check.mismatch("tensor '" + t.name + "' differs from the source's");
      continue;
    }
    // fc2: row k of a unit's block of n_ff rows in the pack's = row perm[k] of the source's block
    // (one block, or one per expert when stacked).
    const uint64_t rb = t.row_bytes(), F = static_cast<uint64_t>(src.config().n_ff);
    for (uint64_t row = 0; row < t.rows(); ++row) {
      const uint64_t block = row / F, k = row % F;
      const int64_t unit = l * per_layer + (e >= 0 ? e : static_cast<int64_t>(block));
      const int32_t* perm = ffn_unit(pk, unit).neuron_perm;
      const uint64_t from = block * F + static_cast<uint64_t>(perm[k]);
      if (std::memcmp(b.data() + row * rb, a.data() + rb * from, rb) != 0) {
        check.mismatch("tensor '" + t.name + "': row " + std::to_string(row) + " differs from the source's row " +
                       std::to_string(from) + " (" + perm_name(l) + ")");
        break;
      }
    }
  }
  for (const gguf::TensorInfo& t : pf.tensors()) {
    if (!expected.count(t.name)) check.mismatch("tensor '" + t.name + "' is in the pack but has no source");
  }
}

}  // namespace

VerifyReport verify_pack(const std::string& source_path, const std::string& pack_path,
                         const std::function<void(int64_t, int64_t)>& on_layer) {
  ModelLoadOptions load;
  load.repack = false;
  const std::unique_ptr<Model> src = Model::load(source_path, load);
  source_bundle_layout(*src);  // the source must be a plain model with one type per role
  std::unique_ptr<Model> pk;
  try {
    pk = Model::load(pack_path, load);
  } catch (const std::exception& e) {
    throw std::runtime_error(pack_path + ": not a valid pack: " + e.what());
  }
  if (!pk->weights().is_pack()) throw std::runtime_error(pack_path + " is not a pack (no " + kVersionKey + ")");
  const ModelConfig& c = src->config();
  if (pk->config().n_layer != c.n_layer || pk->config().n_ff != c.n_ff || pk->config().n_embd != c.n_embd ||
      pk->config().n_expert != c.n_expert) {
    throw std::runtime_error(pack_path + ": its shape (layers, n_ff, n_embd, experts) differs from the source's");
  }
  const BundleLayout want = source_bundle_layout(*src), have = pk->weights().pack_info().layout;
  if (want.gate_type != have.gate_type || want.up_type != have.up_type || want.down_type != have.down_type) {
    throw std::runtime_error(pack_path + ": bundle types gate/up/down " + std::string(type_name(have.gate_type)) + "/" +
                             std::string(type_name(have.up_type)) + "/" + std::string(type_name(have.down_type)) +
                             ", the source gives " + std::string(type_name(want.gate_type)) + "/" +
                             std::string(type_name(want.up_type)) + "/" + std::string(type_name(want.down_type)));
  }
  VerifyReport r;
  Checker check(r);
  check_metadata(src->file(), pk->file(), r, check);
  check_tensors(*src, *pk, r, check);
  const int64_t per_layer = std::max<int64_t>(1, c.n_expert);
  for (int64_t u = 0; u < unit_count(c); ++u) {
    check_unit(*src, *pk, u, r, check);
    if (on_layer && (u + 1) % per_layer == 0) on_layer((u + 1) / per_layer, c.n_layer);
  }
  return r;
}

}  // namespace ember::pack
