#pragma once
// JSON Schema -> GBNF, for response_format json_schema / json_object and tool-call arguments. The
// output is grammar text for Grammar::parse (so it can be logged and inspected). Every keyword is
// either compiled exactly (within the documented bounds: docs/grammar.md) or refused with a
// SchemaError naming it: a keyword is never ignored, so constrained output always validates.
//
// Whitespace policy: between JSON tokens the grammar allows at most one space or tab, or one
// newline followed by up to 20 spaces/tabs (pretty-printing), so a small model cannot spin on
// whitespace forever. No whitespace before or after the top-level value.
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <string_view>

namespace ember::grammar {

// A schema the compiler cannot turn into an exact grammar. pointer() is the JSON pointer of the
// offending schema (e.g. "/properties/tags"), keyword() the keyword ("uniqueItems").
class SchemaError : public std::runtime_error {
 public:
  SchemaError(std::string pointer, std::string keyword, const std::string& message)
      : std::runtime_error("json_schema: " + message + " (keyword '" + keyword + "' at '" +
                           (pointer.empty() ? std::string("#") : pointer) + "')"),
        pointer_(std::move(pointer)),
        keyword_(std::move(keyword)) {}
  const std::string& pointer() const { return pointer_; }
  const std::string& keyword() const { return keyword_; }

 private:
  std::string pointer_;
  std::string keyword_;
};

// GBNF whose root is a value valid against `schema`. Throws SchemaError. Object properties are
// generated in the schema's key order: the ordered_json and text overloads keep the order the
// schema was written in (what a model expects), nlohmann::json's sorts keys alphabetically.
std::string json_schema_to_gbnf(const nlohmann::ordered_json& schema);
std::string json_schema_to_gbnf(const nlohmann::json& schema);
std::string json_schema_to_gbnf(std::string_view schema_text);

// Several schemas in one grammar (tool calls: one arguments schema per function): the expression
// that stands for a value of `schema`, and the rules it uses, each named `rule_prefix` + "s" + N
// (the prefix: letters, digits and '-', and no prefix of another's, e.g. "t0-", "t1-"). The rules
// refer to the shared primitives (string, value, ws, ...), which the caller appends once
// (json_primitive_rules()); nothing here is named "root". Throws SchemaError.
struct SchemaFragment {
  std::string root;
  std::string rules;
};
SchemaFragment json_schema_fragment(const nlohmann::ordered_json& schema, std::string_view rule_prefix);
// The primitive rules every compiled schema refers to: ws, string, integer, number, boolean, null,
// value, object, array (and their helpers).
std::string json_primitive_rules();

// response_format json_object: any JSON object (nested values of any type).
std::string json_object_gbnf();
// Any JSON value.
std::string json_value_gbnf();

}  // namespace ember::grammar
