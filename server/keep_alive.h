#pragma once
// How long a model stays loaded after its last request (Ollama's `keep_alive`, which apps that
// manage a local daemon already send): a number of seconds, or a duration text "300ms", "30s",
// "5m", "1h" (one unit); a negative value keeps the model loaded for good, 0 unloads it as soon
// as the request ends.
#include <chrono>
#include <nlohmann/json.hpp>
#include <string>

namespace ember::server {

// Throws std::invalid_argument with a message for the client ("must be ...").
std::chrono::milliseconds parse_keep_alive(const nlohmann::json& value);
// "5m", "30s", "-1" (forever), "0": the form parse_keep_alive reads back.
std::string keep_alive_text(std::chrono::milliseconds value);

}  // namespace ember::server
