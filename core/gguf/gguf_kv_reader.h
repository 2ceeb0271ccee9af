#pragma once
// Reading GGUF strings and metadata values from a ByteCursor. Every length and count is checked
// against the bytes left in the file and against ReadLimits before anything is allocated.
#include <cstdint>
#include <string>

#include "core/gguf/byte_cursor.h"
#include "core/gguf/gguf_file.h"
#include "core/gguf/gguf_value.h"

namespace ember::gguf {

// GGUF v1 stores counts, string lengths and dimensions in 32 bits; v2 and v3 in 64.
struct Encoding {
  bool narrow_counts = false;
};

// Reads a count or length field (u32 in v1, u64 otherwise).
uint64_t read_count(ByteCursor& in, const Encoding& enc, const FieldName& what);

// Reads a length-prefixed string of at most max_bytes; `what` names it for errors.
std::string read_string(ByteCursor& in, const Encoding& enc, uint64_t max_bytes, const FieldName& what);

// Reads the value of metadata `key`, whose raw type id comes next in the cursor.
Value read_value(ByteCursor& in, const Encoding& enc, const ReadLimits& limits, const std::string& key);

}  // namespace ember::gguf
