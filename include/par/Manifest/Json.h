//===- Json.h - A small JSON reader without LLVM ----------------*- C++ -*-===//
//
// A JSON value tree (null, bool, number, string, array, object) and a parser
// that reports the first error with its line; numbers keep their integer
// value when they have one; and the one string quoting of the JSON par
// writes without LLVM. For the parts of par that link neither LLVM nor
// MLIR: the session reads manifests with it, the tooling its checkpoint
// records and safetensors headers, par-pipeline-sim writes its reports.
// Part of the manifest library (lib/Manifest).
//
//===----------------------------------------------------------------------===//

#ifndef PAR_MANIFEST_JSON_H
#define PAR_MANIFEST_JSON_H

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace par {

class JsonValue {
public:
  enum class Kind { Null, Bool, Number, String, Array, Object };

  Kind kind() const { return kind_; }
  bool isNull() const { return kind_ == Kind::Null; }

  /// The value as an integer, if it is a number with an integer value.
  std::optional<int64_t> integer() const;
  /// The value as a double, if it is a number.
  std::optional<double> number() const {
    return kind_ == Kind::Number ? std::optional<double>(number_)
                                 : std::nullopt;
  }
  /// The value as a bool, if it is one.
  std::optional<bool> boolean() const {
    return kind_ == Kind::Bool ? std::optional<bool>(boolean_) : std::nullopt;
  }
  /// The value as a string, if it is one.
  const std::string *string() const;
  /// The elements, if it is an array.
  const std::vector<JsonValue> *array() const;
  /// The members, if it is an object.
  const std::map<std::string, JsonValue> *object() const;
  /// Member `key` of an object (nullptr if this is not an object or it
  /// lacks the key).
  const JsonValue *get(const std::string &key) const;
  /// Shorthands on members: nullptr or nullopt when absent or of another
  /// kind.
  const std::string *getString(const std::string &key) const;
  std::optional<int64_t> getInteger(const std::string &key) const;
  const std::vector<JsonValue> *getArray(const std::string &key) const;
  const JsonValue *getObject(const std::string &key) const;

  /// Parses `text`; on failure returns nullopt and sets `error`.
  static std::optional<JsonValue> parse(const std::string &text,
                                        std::string &error);

private:
  friend class JsonParser;
  Kind kind_ = Kind::Null;
  bool boolean_ = false;
  double number_ = 0;
  bool isInteger_ = false;
  int64_t integer_ = 0;
  std::string string_;
  std::vector<JsonValue> array_;
  std::map<std::string, JsonValue> object_;
};

/// `s` as a JSON string literal: quotes and backslashes escaped, control
/// characters as \u00XX; other bytes (UTF-8) as they are.
std::string jsonQuote(const std::string &s);

} // namespace par

#endif // PAR_MANIFEST_JSON_H
