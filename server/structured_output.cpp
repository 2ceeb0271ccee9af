#include "server/structured_output.h"

#include <exception>

#include "core/grammar/json_schema.h"
#include "server/openai_api.h"
#include "server/json_fields.h"

namespace ember::server {
namespace {

using nlohmann::json;
using nlohmann::ordered_json;


// The schema at `path` (object keys) of the body, with its keys in written order.
ordered_json ordered_schema(const std::string& body, std::initializer_list<const char*> path) {
  ordered_json j = ordered_json::parse(body, nullptr, /*allow_exceptions=*/false);
  for (const char* key : path) j = ordered_json(j.at(key));
  return j;
}

std::string compile_schema(const json& schema, const std::string& body, std::initializer_list<const char*> path,
                           const std::string& param, const StructuredOutputLimits& limits) {
  if (!schema.is_object() && !schema.is_boolean()) {
    throw BadRequest("'" + param + "' must be a JSON Schema object", param);
  }
  if (schema.dump().size() > limits.max_schema_bytes) {
    throw BadRequest("'" + param + "' is larger than " + std::to_string(limits.max_schema_bytes) + " bytes", param);
  }
  try {
    return grammar::json_schema_to_gbnf(ordered_schema(body, path));
  } catch (const grammar::SchemaError& e) {
    // Never relaxed silently: the client learns which keyword at which place is not supported.
    throw BadRequest(std::string("'") + param + "' cannot be enforced: " + e.what(), param);
  } catch (const std::exception& e) {
    throw BadRequest(std::string("'") + param + "' cannot be compiled: " + e.what(), param);
  }
}

OutputGrammar from_response_format(const json& f, const std::string& body, const StructuredOutputLimits& limits) {
  const char* kShape = "'response_format' must be {\"type\": \"text\" | \"json_object\" | \"json_schema\", ...}";
  if (!f.is_object() || !present(f, "type") || !f.at("type").is_string()) throw BadRequest(kShape, "response_format");
  const std::string type = f.at("type").get<std::string>();
  if (type == "text") return {};
  if (type == "json_object") return {grammar::json_object_gbnf(), "response_format"};
  if (type != "json_schema") throw BadRequest(kShape, "response_format.type");
  if (!present(f, "json_schema") || !f.at("json_schema").is_object()) {
    throw BadRequest("'response_format.json_schema' must be an object with a 'schema'", "response_format.json_schema");
  }
  const json& js = f.at("json_schema");
  if (present(js, "strict") && !js.at("strict").is_boolean()) {
    throw BadRequest("'response_format.json_schema.strict' must be a boolean", "response_format.json_schema.strict");
  }
  if (present(js, "name") && !js.at("name").is_string()) {
    throw BadRequest("'response_format.json_schema.name' must be a string", "response_format.json_schema.name");
  }
  // strict or not, the output is constrained: a schema the grammar cannot enforce is refused
  // rather than followed loosely. Without a schema, any JSON object (as json_object).
  if (!present(js, "schema")) return {grammar::json_object_gbnf(), "response_format"};
  const std::string param = "response_format.json_schema.schema";
  return {compile_schema(js.at("schema"), body, {"response_format", "json_schema", "schema"}, param, limits), param};
}

}  // namespace

OutputGrammar parse_output_grammar(const json& j, const std::string& body, const StructuredOutputLimits& limits) {
  const bool rf = present(j, "response_format");
  const bool text_format = rf && j.at("response_format").is_object() &&
                           j.at("response_format").value("type", json()) == "text";
  const int given = (rf && !text_format) + present(j, "grammar") + present(j, "json_schema");
  if (given > 1) {
    throw BadRequest("only one of 'response_format' (other than text), 'grammar' and 'json_schema' may be given",
                     present(j, "grammar") ? "grammar" : "json_schema");
  }
  if (rf) return from_response_format(j.at("response_format"), body, limits);
  if (present(j, "grammar")) {
    const json& g = j.at("grammar");
    if (!g.is_string()) throw BadRequest("'grammar' must be a string of GBNF", "grammar");
    std::string text = g.get<std::string>();
    if (text.size() > limits.max_grammar_bytes) {
      throw BadRequest("'grammar' is longer than " + std::to_string(limits.max_grammar_bytes) + " bytes", "grammar");
    }
    if (text.empty()) return {};  // llama.cpp: an empty grammar means none
    return {std::move(text), "grammar"};
  }
  if (present(j, "json_schema")) return {compile_schema(j.at("json_schema"), body, {"json_schema"}, "json_schema", limits), "json_schema"};
  return {};
}

}  // namespace ember::server
