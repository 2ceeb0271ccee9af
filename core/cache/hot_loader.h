#pragma once
// Loads each layer's hot prefix (the pinned hottest bundles, NeuronCache::hot_region) from the pack
// at start: the prefix is contiguous in the file, so it is read in large sequential chunks straight
// into the cache's 4 KiB-aligned hot region, with no staging copy.
#include <cstdint>
#include <functional>
#include <span>

#include "core/cache/fetch_error.h"
#include "core/cache/neuron_cache.h"
#include "io/batch_reader.h"

namespace ember::io {
class DirectFile;
}

namespace ember::cache {

// tensor_offsets[l]: file offset of layer l's bundle tensor (a multiple of 4096 in a pack).
// chunk_bytes: size of each read (a positive multiple of 4096). Returns the bytes read. Throws
// std::invalid_argument when the offsets do not match the cache's layers, a tensor lies outside
// the file or is misaligned for an O_DIRECT file; FetchError naming the file, offset and length when
// a read fails (after waiting for the others). Allocates (once, at start).
// between_reads (may be empty) runs after each batch of completions; when it throws, no more reads
// are started, the ones in flight are waited for (they write into the cache) and its exception is
// rethrown: a load abandoned on request (ModelLoadOptions::checkpoint) stops within a read or two.
uint64_t load_hot_prefixes(NeuronCache& cache, io::BatchReader& reader, const io::DirectFile& file,
                           std::span<const uint64_t> tensor_offsets, uint32_t chunk_bytes = 1u << 20,
                           const std::function<void()>& between_reads = {});

}  // namespace ember::cache
