#pragma once
// `ember profile` on a mixture of experts: the routing statistics (core/model/routing_stats.h) as
// JSON and as the table printed after the profile's.
#include <nlohmann/json.hpp>
#include <string>

#include "core/model/routing_stats.h"

namespace ember::cli {

nlohmann::json routing_json(const RoutingStats& stats, const std::string& text_path, double seconds);
void print_routing(const nlohmann::json& routing);  // to stderr

}  // namespace ember::cli
