#include "core/cache/hot_loader.h"

#include <algorithm>
#include <exception>
#include <stdexcept>
#include <string>
#include <vector>

#include "io/direct_file.h"

namespace ember::cache {

uint64_t load_hot_prefixes(NeuronCache& cache, io::BatchReader& reader, const io::DirectFile& file,
                           std::span<const uint64_t> tensor_offsets, uint32_t chunk_bytes,
                           const std::function<void()>& between_reads) {
  if (tensor_offsets.size() != cache.n_layers()) {
    throw std::invalid_argument("hot loader: " + std::to_string(tensor_offsets.size()) + " tensor offsets for " +
                                std::to_string(cache.n_layers()) + " layers");
  }
  if (chunk_bytes == 0 || chunk_bytes % io::kDirectAlignment != 0) {
    throw std::invalid_argument("hot loader: chunk_bytes " + std::to_string(chunk_bytes) + " is not a positive multiple of 4096");
  }
  const uint64_t align = file.alignment();
  std::vector<io::ReadRequest> requests;
  for (size_t l = 0; l < cache.n_layers(); ++l) {
    const HotRegion region = cache.hot_region(l);
    if (region.bytes == 0) continue;
    const uint64_t offset = tensor_offsets[l];
    if (offset > file.size() || region.bytes > file.size() - offset) {
      throw std::invalid_argument("hot loader: " + file.path() + ": layer " + std::to_string(l) + "'s hot prefix [" +
                                  std::to_string(offset) + ", +" + std::to_string(region.bytes) +
                                  ") lies outside the file of " + std::to_string(file.size()) + " bytes");
    }
    if (offset % align != 0) {
      throw std::invalid_argument("hot loader: " + file.path() + ": layer " + std::to_string(l) + "'s bundle tensor at " +
                                  std::to_string(offset) + " is not 4096-aligned (not a pack?)");
    }
    // Chunks start at multiples of chunk_bytes (so of 4096); the last one is rounded up to the
    // alignment, which the region's capacity (rounded to 4096) has room for.
    for (uint64_t pos = 0; pos < region.bytes; pos += chunk_bytes) {
      const uint64_t len = std::min<uint64_t>(chunk_bytes, region.bytes - pos);
      const uint64_t read_len = (len + align - 1) / align * align;
      requests.push_back(io::ReadRequest{offset + pos, static_cast<uint32_t>(read_len), static_cast<uint32_t>(len),
                                         region.data + pos, requests.size()});
    }
  }

  std::vector<io::ReadCompletion> completions(std::max<size_t>(reader.capacity(), 1));
  std::string failure;
  std::exception_ptr abandoned;  // what between_reads threw
  uint64_t bytes = 0;
  size_t next = 0;
  while (next < requests.size() || reader.in_flight() > 0) {
    const bool stopping = !failure.empty() || abandoned;
    if (!stopping && next < requests.size() && reader.free_slots() > 0) {
      const size_t n = std::min(reader.free_slots(), requests.size() - next);
      reader.submit(std::span<const io::ReadRequest>(requests.data() + next, n));
      next += n;
    } else if (stopping && reader.in_flight() == 0) {
      break;
    }
    const size_t got = reader.harvest(std::span<io::ReadCompletion>(completions), 1);
    for (size_t k = 0; k < got; ++k) {
      const io::ReadCompletion& c = completions[k];
      if (c.ok()) {
        bytes += static_cast<uint64_t>(c.result);
      } else if (failure.empty()) {
        failure = "loading the hot neurons: " + io::describe_failure(file.path(), c);
      }
    }
    if (between_reads && !abandoned) {
      try {
        between_reads();
      } catch (...) {
        abandoned = std::current_exception();  // rethrown once the reads in flight have landed
      }
    }
  }
  if (abandoned) std::rethrow_exception(abandoned);
  if (!failure.empty()) throw FetchError(failure);
  return bytes;
}

}  // namespace ember::cache
