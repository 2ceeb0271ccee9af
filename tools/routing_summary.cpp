#include "tools/routing_summary.h"

#include <algorithm>
#include <cstdio>

namespace ember::cli {

nlohmann::json routing_json(const RoutingStats& stats, const std::string& text_path, double seconds) {
  nlohmann::json layers = nlohmann::json::array();
  double max_load = 0.0, min_load = 1e9, repeat = 0.0, overlap = 0.0;
  for (size_t l = 0; l < stats.layers().size(); ++l) {
    const LayerRoutingStats& s = stats.layers()[l];
    layers.push_back({{"layer", l},
                      {"expert_slots", s.expert_slots},
                      {"max_load", s.max_load()},
                      {"min_load", s.min_load()},
                      {"top1_repeat", s.top1_repeat_rate()},
                      {"overlap", s.overlap_rate()}});
    max_load = std::max(max_load, s.max_load());
    min_load = std::min(min_load, s.min_load());
    repeat += s.top1_repeat_rate();
    overlap += s.overlap_rate();
  }
  const double n = std::max<double>(1.0, static_cast<double>(stats.layers().size()));
  return {{"kind", "routing"},
          {"text", text_path},
          {"tokens", stats.layers().empty() ? 0 : stats.layers()[0].tokens},
          {"seconds", seconds},
          {"max_load", max_load},
          {"min_load", min_load},
          {"top1_repeat", repeat / n},
          {"overlap", overlap / n},
          {"chance_top1_repeat", stats.chance_top1_repeat()},
          {"chance_overlap", stats.chance_overlap()},
          {"layers", layers}};
}

void print_routing(const nlohmann::json& j) {
  std::fprintf(stderr, "layer  max.load  min.load  top1.repeat  overlap   (load: share / uniform share)\n");
  for (const auto& l : j["layers"]) {
    std::fprintf(stderr, "%5d  %8.2f  %8.2f  %11.3f  %7.3f\n", l["layer"].get<int>(), l["max_load"].get<double>(),
                 l["min_load"].get<double>(), l["top1_repeat"].get<double>(), l["overlap"].get<double>());
  }
  std::fprintf(stderr, "all    %8.2f  %8.2f  %11.3f  %7.3f   (chance: repeat %.3f, overlap %.3f)\n",
               j["max_load"].get<double>(), j["min_load"].get<double>(), j["top1_repeat"].get<double>(),
               j["overlap"].get<double>(), j["chance_top1_repeat"].get<double>(), j["chance_overlap"].get<double>());
}

}  // namespace ember::cli
