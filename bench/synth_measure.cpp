// How sparse, skewed, predictable and local the FFN activations of a synthetic model really are:
// the F32 reference pass of tests/synth/sparse_reference.h over a text shaped like the model's
// greedy output, with the statistics the tests check on the tiny preset, for any preset (the
// numbers of docs/synthetic-models.md); for mixtures of experts, the routing statistics of
// tests/synth/router_stats.h instead, and for sparse ones the same statistics per expert on the
// positions routed to it. A measurement, not a test: it asserts nothing.
//
// usage: ember-synth-measure MODEL.gguf [TOKENS]     (TOKENS default 64, at least 16; about 90 s
//                                                     for the 1b preset)
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>

#include "core/gguf/gguf_file.h"
#include "tests/synth/ffn_stats.h"
#include "tests/synth/router_stats.h"
#include "tests/synth/sparse_reference.h"

using namespace ember;

int main(int argc, char** argv) {
  if (argc < 2 || argc > 3) {
    std::fprintf(stderr, "usage: ember-synth-measure MODEL.gguf [TOKENS]\n");
    return 2;
  }
  const int n_tokens = argc == 3 ? std::max(16, std::atoi(argv[2])) : 64;
  try {
    const auto f = gguf::GgufFile::open(argv[1]);
    const bool drelu = f.metadata().get_string("llama.ffn_activation") == "drelu";
    const auto n_vocab = static_cast<int32_t>(f.find_tensor("token_embd.weight")->ne[1]);
    const auto trace = test::trace_ffn(f, test::chain_text(n_tokens, n_vocab));
    if (const auto n_used = f.metadata().get_uint("llama.expert_used_count")) {
      const bool sparse = f.metadata().get_string("llama.ffn_activation").value_or("silu") != "silu";
      double active_min = 1, active_max = 0, active_sum = 0, recall_min = 1, recall_sum = 0, precision_sum = 0;
      int routed = 0, unrouted = 0;
      for (size_t l = 0; l < trace.router.size(); ++l) {
        const auto s = test::router_stats(trace.router[l], static_cast<int64_t>(*n_used));
        std::printf("layer %zu: load min %.2f max %.2f (x even), top-1 p %.3f, first choice repeated %.3f, "
                    "a picked expert shared %.3f, bias ratio %.3f\n",
                    l, s.min_load, s.max_load, s.top1_prob, s.repeat_first, s.repeat_any, s.bias_ratio);
        for (size_t e = 0; sparse && e < trace.experts[l].size(); ++e) {
          const auto x = test::expert_stats(trace, l, e, drelu);
          if (!x.routed) {
            std::printf("  expert %zu: never routed\n", e);
            ++unrouted;
            continue;
          }
          const double active = 1.0 - x.s.inactive;
          active_min = std::min(active_min, active), active_max = std::max(active_max, active);
          recall_min = std::min(recall_min, x.s.recall);
          active_sum += active, recall_sum += x.s.recall, precision_sum += x.s.precision, ++routed;
          std::printf("  expert %zu (%zu tokens): active %.4f, hot-20%% share %.4f, recall %.4f, precision %.4f\n", e,
                      x.tokens, 1.0 - x.s.inactive, x.s.hot20_share, x.s.recall, x.s.precision);
        }
      }
      if (routed > 0)
        std::printf("experts: %d routed, %d never; active min %.4f mean %.4f max %.4f, recall min %.4f mean %.4f, "
                    "precision mean %.4f\n",
                    routed, unrouted, active_min, active_sum / routed, active_max, recall_min, recall_sum / routed,
                    precision_sum / routed);
      return 0;
    }
    test::LayerStats mean;
    mean.recall = mean.precision = 0;  // a LayerStats starts them at 1, the value without predictor
    const auto n_layers = static_cast<double>(trace.gate.size());
    for (size_t l = 0; l < trace.gate.size(); ++l) {
      const auto s = test::layer_stats(trace, l, drelu);
      std::printf("layer %zu: inactive %.4f, hot-20%% share %.4f, recall %.4f, precision %.4f, "
                  "jaccard next %.4f vs 16 apart %.4f\n",
                  l, s.inactive, s.hot20_share, s.recall, s.precision, s.jaccard_next, s.jaccard_far);
      mean.inactive += s.inactive / n_layers;
      mean.hot20_share += s.hot20_share / n_layers;
      mean.jaccard_next += s.jaccard_next / n_layers;
      mean.jaccard_far += s.jaccard_far / n_layers;
      mean.recall += s.recall / n_layers;
      mean.precision += s.precision / n_layers;
    }
    std::printf("mean: inactive %.4f, hot-20%% share %.4f, recall %.4f, precision %.4f, jaccard next %.4f "
                "vs 16 apart %.4f\n",
                mean.inactive, mean.hot20_share, mean.recall, mean.precision, mean.jaccard_next, mean.jaccard_far);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ember-synth-measure: %s\n", e.what());
    return 1;
  }
  return 0;
}
