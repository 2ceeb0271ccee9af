#include "core/gguf/gguf_file.h"

#include <cstring>
#include <limits>

#include "core/gguf/byte_cursor.h"
#include "core/gguf/gguf_kv_reader.h"

namespace ember::gguf {
namespace {

constexpr uint64_t kDefaultAlignment = 32;
constexpr uint32_t kMaxDims = 4;  // GGML_MAX_DIMS
constexpr uint64_t kInt64Max = static_cast<uint64_t>(std::numeric_limits<int64_t>::max());

std::string str(uint64_t v) { return std::to_string(v); }

bool checked_add(uint64_t a, uint64_t b, uint64_t* out) { return !__builtin_add_overflow(a, b, out); }
bool checked_mul(uint64_t a, uint64_t b, uint64_t* out) { return !__builtin_mul_overflow(a, b, out); }

// Rounds up to a power-of-two alignment; false when the result does not fit 64 bits.
bool checked_align_up(uint64_t v, uint64_t alignment, uint64_t* out) {
  uint64_t bumped;
  if (!checked_add(v, alignment - 1, &bumped)) return false;
  *out = bumped & ~(alignment - 1);
  return true;
}

// Fewest bytes a metadata entry or a tensor info can take in the file; used to reject counts the
// rest of the file cannot hold before reserving anything for them.
uint64_t min_kv_bytes(const Encoding& enc) {
  const uint64_t len = enc.narrow_counts ? 4 : 8;
  return len + 1 /*key*/ + 4 /*type*/ + 1 /*smallest value*/;
}
uint64_t min_tensor_info_bytes(const Encoding& enc) {
  const uint64_t len = enc.narrow_counts ? 4 : 8;
  return len + 1 /*name*/ + 4 /*n_dims*/ + len /*one dim*/ + 4 /*type*/ + 8 /*offset*/;
}

uint64_t read_alignment(const Metadata& metadata, const ReadLimits& limits) {
  const Value* v = metadata.find("general.alignment");
  if (v == nullptr) return kDefaultAlignment;
  // ggml reads it as a u32 and refuses any other type; so do we, so that a file we accept loads there.
  if (v->type != ValueType::UINT32) {
    throw GgufError("metadata key 'general.alignment' has type " + std::string(value_type_name(v->type)) +
                    ", expected UINT32");
  }
  const uint64_t a = std::get<uint64_t>(v->data);
  if (a == 0 || (a & (a - 1)) != 0) {
    throw GgufError("metadata key 'general.alignment' = " + str(a) + " is not a power of two");
  }
  if (a > limits.max_alignment) {
    throw GgufError("metadata key 'general.alignment' = " + str(a) + " exceeds the limit of " +
                    str(limits.max_alignment));
  }
  return a;
}

struct RawTensorInfo {
  TensorInfo info;
  uint64_t relative_offset = 0;
};

// Reads one tensor info and checks everything that does not depend on the other tensors.
//
// A dimension of 0 is rejected, although ggml allows empty tensors in general: model weights are
// never empty, an empty one can only come from a broken or hostile file, and rejecting it here keeps
// rows() and row_bytes() free of divisions by zero for every caller.
RawTensorInfo read_tensor_info(ByteCursor& in, const Encoding& enc, const ReadLimits& limits, uint64_t index) {
  const std::string which = "tensor #" + str(index);
  RawTensorInfo raw;
  TensorInfo& t = raw.info;

  const uint64_t name_at = in.position();
  const uint64_t name_length = read_count(in, enc, which + " name length");
  // ggml keeps names NUL-terminated in char[GGML_MAX_NAME], so a name must be shorter than that.
  if (name_length >= limits.max_name_bytes) {
    throw GgufError(which + " at offset " + str(name_at) + ": name of " + str(name_length) +
                    " bytes is too long (names must be shorter than " + str(limits.max_name_bytes) + " bytes)");
  }
  if (name_length == 0) throw GgufError(which + " at offset " + str(name_at) + ": name is empty");
  t.name.assign(static_cast<size_t>(name_length), '\0');
  in.read(t.name.data(), name_length, which + " name");
  const std::string where = "tensor '" + t.name + "'";

  t.n_dims = in.read_scalar<uint32_t>(where + " n_dims");
  if (t.n_dims == 0 || t.n_dims > kMaxDims) {
    throw GgufError(where + ": n_dims is " + str(t.n_dims) + ", expected 1.." + str(kMaxDims));
  }
  for (uint32_t d = 0; d < t.n_dims; ++d) {
    const std::string dim = where + " ne[" + str(d) + "]";
    const uint64_t ne = read_count(in, enc, dim);
    if (ne > kInt64Max) throw GgufError(dim + " is negative (" + std::to_string(static_cast<int64_t>(ne)) + ")");
    if (ne == 0) throw GgufError(dim + " is 0: Ember rejects empty tensors (model weights are never empty)");
    t.ne[d] = ne;
  }

  const uint32_t type_id = in.read_scalar<uint32_t>(where + " type");
  const auto geometry = type_geometry(type_id);
  if (!geometry) throw GgufError(where + ": unknown tensor type id " + str(type_id));
  t.type = static_cast<GgmlType>(type_id);
  raw.relative_offset = in.read_scalar<uint64_t>(where + " offset");

  // ggml requires the element count to fit int64_t.
  uint64_t n_elements = 1;
  for (uint64_t ne : t.ne) {
    if (!checked_mul(n_elements, ne, &n_elements) || n_elements > kInt64Max) {
      throw GgufError(where + ": element count " + str(t.ne[0]) + "x" + str(t.ne[1]) + "x" + str(t.ne[2]) + "x" +
                      str(t.ne[3]) + " overflows int64");
    }
  }
  t.n_elements = n_elements;
  if (t.ne[0] % geometry->block_size != 0) {
    throw GgufError(where + ": ne[0] = " + str(t.ne[0]) + " is not a multiple of " + std::string(geometry->name) +
                    "'s block size " + str(geometry->block_size));
  }
  const uint64_t bytes_per_row = t.ne[0] / geometry->block_size * geometry->type_size;  // <= ne0 * type_size
  uint64_t n_bytes;
  if (!checked_mul(bytes_per_row, t.rows(), &n_bytes)) {
    throw GgufError(where + ": byte size (" + str(bytes_per_row) + " bytes x " + str(t.rows()) +
                    " rows) overflows 64 bits");
  }
  t.n_bytes = n_bytes;
  return raw;
}

}  // namespace

GgufFile GgufFile::open(const std::string& path, const ReadLimits& limits) {
  GgufFile g(io::ReadOnlyFile::open(path));
  try {
    g.parse(limits);
  } catch (const GgufError& e) {
    throw GgufError(path + ": " + e.what());
  }
  return g;
}

void GgufFile::parse(const ReadLimits& limits) {
  if (file_.size() == 0) throw GgufError("file is empty");
  ByteCursor in(file_);

  magic_ = in.read_scalar<uint32_t>("magic");
  if (magic_ != kMagicGguf && magic_ != kMagicPwri) {
    char shown[5] = {};
    std::memcpy(shown, &magic_, 4);
    for (char& c : shown) {
      if (c != 0 && (c < 0x20 || c > 0x7e)) c = '?';
    }
    throw GgufError("bad magic \"" + std::string(shown, 4) + "\": not a GGUF file");
  }
  version_ = in.read_scalar<uint32_t>("version");
  if (version_ < 1 || version_ > 3) {
    throw GgufError("unsupported GGUF version " + str(version_) + " (supported: 1, 2, 3)");
  }
  const Encoding enc{version_ == 1};

  const uint64_t n_tensors = read_count(in, enc, "tensor count");
  const uint64_t n_kv = read_count(in, enc, "metadata count");
  if (n_tensors > limits.max_tensors) {
    throw GgufError("tensor count " + str(n_tensors) + " exceeds the limit of " + str(limits.max_tensors));
  }
  if (n_kv > limits.max_kv) {
    throw GgufError("metadata count " + str(n_kv) + " exceeds the limit of " + str(limits.max_kv));
  }
  // Both counts are bounded by what the rest of the file can hold (checked as divisions: no overflow).
  if (n_kv > in.remaining() / min_kv_bytes(enc)) {
    throw GgufError("metadata count " + str(n_kv) + " exceeds what the " + str(in.remaining()) +
                    " bytes left in the file can hold");
  }
  if (n_tensors > in.remaining() / min_tensor_info_bytes(enc)) {
    throw GgufError("tensor count " + str(n_tensors) + " exceeds what the " + str(in.remaining()) +
                    " bytes left in the file can hold");
  }

  for (uint64_t i = 0; i < n_kv; ++i) {
    const uint64_t at = in.position();
    std::string key = read_string(in, enc, limits.max_string_bytes, "metadata #" + str(i) + " key");
    if (key.empty()) throw GgufError("metadata #" + str(i) + " at offset " + str(at) + ": key is empty");
    if (metadata_.contains(key)) throw GgufError("duplicate metadata key '" + key + "' at offset " + str(at));
    Value value = read_value(in, enc, limits, key);
    metadata_.add(std::move(key), std::move(value));
  }
  alignment_ = read_alignment(metadata_, limits);

  std::vector<RawTensorInfo> raw;
  raw.reserve(static_cast<size_t>(n_tensors));
  for (uint64_t i = 0; i < n_tensors; ++i) {
    raw.push_back(read_tensor_info(in, enc, limits, i));
    const std::string& name = raw.back().info.name;
    if (tensor_index_.count(name) != 0) throw GgufError("duplicate tensor name '" + name + "'");
    tensor_index_.emplace(name, i);
  }

  if (!checked_align_up(in.position(), alignment_, &data_offset_)) {
    throw GgufError("data section offset overflows 64 bits");  // unreachable for real file sizes
  }
  // A vocab-only file may end before the padding; only tensors need the data section to exist.

  // Offsets must be aligned, in declaration order and non-overlapping, and every byte of data
  // inside the file. ggml is stricter (no gaps at all); gaps are harmless, so they are allowed.
  uint64_t next_free = 0;  // relative to the data section: end of the previous tensor, padded
  tensors_.reserve(raw.size());
  for (RawTensorInfo& r : raw) {
    TensorInfo& t = r.info;
    const std::string where = "tensor '" + t.name + "'";
    const uint64_t rel = r.relative_offset;
    if (rel % alignment_ != 0) {
      throw GgufError(where + ": offset " + str(rel) + " is not a multiple of the alignment " + str(alignment_));
    }
    if (rel < next_free) {
      throw GgufError(where + ": offset " + str(rel) + " overlaps the previous tensor or is out of order (expected >= " +
                      str(next_free) + ")");
    }
    uint64_t rel_end;
    if (!checked_add(rel, t.n_bytes, &rel_end) || !checked_align_up(rel_end, alignment_, &next_free)) {
      throw GgufError(where + ": offset " + str(rel) + " + " + str(t.n_bytes) +
                      " bytes, padded to the alignment, overflows 64 bits");
    }
    uint64_t abs_end;
    if (!checked_add(data_offset_, rel, &t.offset) || !checked_add(t.offset, t.n_bytes, &abs_end) ||
        abs_end > file_.size()) {
      throw GgufError(where + ": data [" + str(rel) + ", +" + str(t.n_bytes) + ") in the data section at " +
                      str(data_offset_) + " runs past the end of the file (" + str(file_.size()) + " bytes)");
    }
    tensors_.push_back(std::move(t));
  }
}

const TensorInfo* GgufFile::find_tensor(std::string_view name) const {
  auto it = tensor_index_.find(std::string(name));
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

void GgufFile::read_tensor(const TensorInfo& t, void* dst) const { file_.read_exact(dst, t.n_bytes, t.offset); }

io::MappedRegion GgufFile::map_tensor(const TensorInfo& t) const {
  return io::MappedRegion::map(file_, t.offset, t.n_bytes);
}

}  // namespace ember::gguf
