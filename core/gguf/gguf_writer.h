#pragma once
// Streaming GGUF v3 writer: metadata and tensor infos are declared first, then tensor data are
// appended in declaration order (each padded to the alignment), so multi-GB files never sit in
// memory. Files it writes load in llama.cpp.
#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

#include "core/gguf/gguf_value.h"
#include "core/tensor/ggml_type.h"

namespace ember::gguf {

class GgufWriter {
 public:
  GgufWriter();
  ~GgufWriter();  // closes (and leaves incomplete) a file whose finish() was not reached
  GgufWriter(const GgufWriter&) = delete;
  GgufWriter& operator=(const GgufWriter&) = delete;

  void set_powerinfer_magic(bool pwri);      // "PWRI" instead of "GGUF"
  void set_alignment(uint64_t alignment);    // power of two; also written as general.alignment

  // Metadata, in the order added (keys must be unique).
  void add_u32(std::string key, uint32_t v);
  void add_i32(std::string key, int32_t v);
  void add_u64(std::string key, uint64_t v);
  void add_f32(std::string key, float v);
  void add_bool(std::string key, bool v);
  void add_string(std::string key, std::string v);
  void add_string_array(std::string key, std::vector<std::string> v);
  void add_f32_array(std::string key, const std::vector<float>& v);
  void add_i32_array(std::string key, const std::vector<int32_t>& v);
  void add_value(std::string key, const Value& v);  // copies a value read from another file

  // Declares a tensor; ne[0] is the row length. Data must follow in the same order.
  void add_tensor(std::string name, GgmlType type, std::vector<uint64_t> ne);

  // Writes header, metadata and tensor infos to path (truncating it).
  void begin(const std::string& path);
  // Appends bytes of the current tensor; may be called several times per tensor. When a tensor's
  // declared size is reached the writer pads and moves to the next one. Throws on overflow.
  void write_tensor_data(const void* data, uint64_t n);
  // Checks that every tensor got all its bytes, flushes and closes. Throws otherwise.
  void finish();

 private:
  struct PendingTensor {
    std::string name;
    GgmlType type;
    std::vector<uint64_t> ne;
    uint64_t n_bytes;
    uint64_t offset;  // relative to the data section
  };
  void write_raw(const void* p, uint64_t n);
  Metadata metadata_;
  std::vector<PendingTensor> tensors_;
  uint64_t alignment_ = 32;
  bool pwri_ = false;
  std::FILE* out_ = nullptr;
  size_t current_ = 0;
  uint64_t written_in_current_ = 0;
  std::string path_;
};

}  // namespace ember::gguf
