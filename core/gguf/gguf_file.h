#pragma once
// Reader for GGUF v1/v2/v3 files (and PowerInfer's "PWRI" files, same layout). Parses the header,
// metadata and tensor infos through bounded positioned reads (the file is never assumed to fit in
// memory), validates every count, length, type, shape, size and offset against the file, and gives
// access to tensor data by aligned read or by mmap, as the caller chooses.
#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/gguf/gguf_value.h"
#include "core/tensor/ggml_type.h"
#include "io/file.h"

namespace ember::gguf {

// Every accepted tensor has 1..4 dimensions, each >= 1: Ember rejects empty dimensions (which ggml
// allows in general) because model weights are never empty, so rows() and row_bytes() never divide
// by zero. Offsets are aligned, in file order, non-overlapping, and the data lie inside the file.
struct TensorInfo {
  std::string name;
  uint32_t n_dims = 0;
  std::array<uint64_t, 4> ne{1, 1, 1, 1};  // ne[0] is the contiguous (row) dimension, as in ggml
  GgmlType type = GgmlType::F32;
  uint64_t offset = 0;       // absolute file offset of the first byte of data
  uint64_t n_elements = 0;
  uint64_t n_bytes = 0;      // exact size of the data (without padding)
  uint64_t rows() const { return n_elements / ne[0]; }
  uint64_t row_bytes() const { return n_bytes / rows(); }
};

struct ReadLimits {
  uint64_t max_string_bytes = 64ull << 20;  // one metadata string (chat templates can be large)
  uint64_t max_array_elements = 1ull << 24;   // vocabularies are ~32k-260k
  uint64_t max_tensors = 1ull << 20;
  uint64_t max_kv = 1ull << 20;
  uint64_t max_name_bytes = 64;               // GGML_MAX_NAME: names must be shorter (ggml adds a NUL)
  uint64_t max_alignment = 1ull << 20;
};

class GgufFile {
 public:
  static constexpr uint32_t kMagicGguf = 0x46554747;  // "GGUF" little-endian
  static constexpr uint32_t kMagicPwri = 0x49525750;  // "PWRI"

  // Opens and validates; throws GgufError (or io::IoError) with a message naming the problem.
  static GgufFile open(const std::string& path, const ReadLimits& limits = {});

  uint32_t version() const { return version_; }
  bool is_powerinfer() const { return magic_ == kMagicPwri; }
  uint64_t alignment() const { return alignment_; }
  // Header end rounded up to the alignment. For a file without tensors (vocab-only) this may lie
  // past the end of the file, since such files often omit the final padding.
  uint64_t data_offset() const { return data_offset_; }
  uint64_t file_size() const { return file_.size(); }
  const std::string& path() const { return file_.path(); }

  const Metadata& metadata() const { return metadata_; }
  const std::vector<TensorInfo>& tensors() const { return tensors_; }
  const TensorInfo* find_tensor(std::string_view name) const;  // nullptr when absent

  const io::ReadOnlyFile& file() const { return file_; }
  // Reads a tensor's n_bytes into dst.
  void read_tensor(const TensorInfo& t, void* dst) const;
  // Maps a tensor's bytes read-only.
  io::MappedRegion map_tensor(const TensorInfo& t) const;

  GgufFile(GgufFile&&) noexcept = default;
  GgufFile& operator=(GgufFile&&) noexcept = default;

 private:
  explicit GgufFile(io::ReadOnlyFile file) : file_(std::move(file)) {}
  void parse(const ReadLimits& limits);  // fills everything below from file_; throws GgufError
  io::ReadOnlyFile file_;
  uint32_t magic_ = 0;
  uint32_t version_ = 0;
  uint64_t alignment_ = 32;
  uint64_t data_offset_ = 0;
  Metadata metadata_;
  std::vector<TensorInfo> tensors_;
  std::unordered_map<std::string, size_t> tensor_index_;
};

}  // namespace ember::gguf
