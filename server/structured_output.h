#pragma once
// The request fields that constrain the output to a grammar: OpenAI's `response_format`
// (`text`, `json_object`, `json_schema`) and llama.cpp's top-level `grammar` (GBNF text) and
// `json_schema`. They all become GBNF text here, on the request's own thread; the grammar is
// compiled later, off the I/O thread (prepare_completion_job). No HTTP here.
#include <cstddef>
#include <nlohmann/json.hpp>
#include <string>

namespace ember::server {

struct StructuredOutputLimits {
  size_t max_grammar_bytes = 256 * 1024;  // `grammar` text
  size_t max_schema_bytes = 256 * 1024;   // a schema, as compact JSON
};

struct OutputGrammar {
  std::string gbnf;   // empty: unconstrained
  std::string param;  // the field it came from, for errors ("response_format", "grammar", ...)
};

// Reads the fields from the request `body` (the text: a schema's properties are generated in the
// order they were written, which the parsed, key-sorted `request` has lost). Throws BadRequest
// naming the field: a malformed field, two of them at once, a field over the limits, or a schema
// keyword the compiler does not support (the message names the keyword and its JSON pointer).
OutputGrammar parse_output_grammar(const nlohmann::json& request, const std::string& body,
                                   const StructuredOutputLimits& limits);

}  // namespace ember::server
