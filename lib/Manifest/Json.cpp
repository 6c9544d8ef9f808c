//===- Json.cpp - A small JSON reader for manifests -----------------------===//
//
// A recursive-descent parser over RFC 8259 JSON: objects, arrays, strings
// (with \uXXXX escapes encoded as UTF-8), numbers, true, false and null.
// Nesting is limited so that a hostile file cannot exhaust the stack.
//
//===----------------------------------------------------------------------===//

#include "par/Manifest/Json.h"

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace par {

std::optional<int64_t> JsonValue::integer() const {
  if (kind_ != Kind::Number || !isInteger_)
    return std::nullopt;
  return integer_;
}

const std::string *JsonValue::string() const {
  return kind_ == Kind::String ? &string_ : nullptr;
}

const std::map<std::string, JsonValue> *JsonValue::object() const {
  return kind_ == Kind::Object ? &object_ : nullptr;
}

const std::vector<JsonValue> *JsonValue::array() const {
  return kind_ == Kind::Array ? &array_ : nullptr;
}

const JsonValue *JsonValue::get(const std::string &key) const {
  if (kind_ != Kind::Object)
    return nullptr;
  auto it = object_.find(key);
  return it == object_.end() ? nullptr : &it->second;
}

const std::string *JsonValue::getString(const std::string &key) const {
  const JsonValue *v = get(key);
  return v ? v->string() : nullptr;
}

std::optional<int64_t> JsonValue::getInteger(const std::string &key) const {
  const JsonValue *v = get(key);
  return v ? v->integer() : std::nullopt;
}

const std::vector<JsonValue> *
JsonValue::getArray(const std::string &key) const {
  const JsonValue *v = get(key);
  return v ? v->array() : nullptr;
}

const JsonValue *JsonValue::getObject(const std::string &key) const {
  const JsonValue *v = get(key);
  return v && v->kind() == Kind::Object ? v : nullptr;
}

class JsonParser {
public:
  explicit JsonParser(const std::string &text) : text(text) {}

  bool parseDocument(JsonValue &out) {
    if (!parseValue(out, 0))
      return false;
    skipSpace();
    return pos == text.size() || fail("trailing characters");
  }

  std::string error;

private:
  static constexpr int kMaxDepth = 256;
  const std::string &text;
  size_t pos = 0;

  bool fail(const std::string &what) {
    if (error.empty()) {
      int line = 1;
      for (size_t i = 0; i < pos && i < text.size(); ++i)
        line += text[i] == '\n';
      error = what + " at line " + std::to_string(line);
    }
    return false;
  }

  void skipSpace() {
    while (pos < text.size() && (text[pos] == ' ' || text[pos] == '\t' ||
                                 text[pos] == '\n' || text[pos] == '\r'))
      ++pos;
  }

  bool literal(const char *word) {
    size_t n = 0;
    while (word[n])
      ++n;
    if (text.compare(pos, n, word) != 0)
      return fail("invalid literal");
    pos += n;
    return true;
  }

  bool parseValue(JsonValue &out, int depth) {
    if (depth > kMaxDepth)
      return fail("nesting too deep");
    skipSpace();
    if (pos >= text.size())
      return fail("unexpected end of input");
    char c = text[pos];
    switch (c) {
    case '{':
      return parseObject(out, depth);
    case '[':
      return parseArray(out, depth);
    case '"':
      out.kind_ = JsonValue::Kind::String;
      return parseString(out.string_);
    case 't':
      out.kind_ = JsonValue::Kind::Bool;
      out.boolean_ = true;
      return literal("true");
    case 'f':
      out.kind_ = JsonValue::Kind::Bool;
      return literal("false");
    case 'n':
      out.kind_ = JsonValue::Kind::Null;
      return literal("null");
    default:
      if (c == '-' || (c >= '0' && c <= '9'))
        return parseNumber(out);
      return fail(std::string("unexpected character '") + c + "'");
    }
  }

  bool parseNumber(JsonValue &out) {
    size_t start = pos;
    if (text[pos] == '-')
      ++pos;
    bool integral = true;
    while (pos < text.size()) {
      char c = text[pos];
      if (c == '.' || c == 'e' || c == 'E' || c == '+' ||
          (c == '-' && pos > start))
        integral = false;
      else if (c < '0' || c > '9')
        break;
      ++pos;
    }
    std::string s = text.substr(start, pos - start);
    char *end = nullptr;
    out.kind_ = JsonValue::Kind::Number;
    out.number_ = strtod(s.c_str(), &end);
    if (s.empty() || s == "-" || *end)
      return fail("invalid number '" + s + "'");
    if (integral) {
      errno = 0;
      long long i = strtoll(s.c_str(), &end, 10);
      out.isInteger_ = errno == 0 && !*end;
      out.integer_ = i;
    } else if (std::floor(out.number_) == out.number_ &&
               std::fabs(out.number_) < 9.0e15) {
      out.isInteger_ = true;
      out.integer_ = (int64_t)out.number_;
    }
    return true;
  }

  static void appendUtf8(std::string &s, uint32_t cp) {
    if (cp < 0x80) {
      s += (char)cp;
    } else if (cp < 0x800) {
      s += (char)(0xC0 | cp >> 6);
      s += (char)(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
      s += (char)(0xE0 | cp >> 12);
      s += (char)(0x80 | (cp >> 6 & 0x3F));
      s += (char)(0x80 | (cp & 0x3F));
    } else {
      s += (char)(0xF0 | cp >> 18);
      s += (char)(0x80 | (cp >> 12 & 0x3F));
      s += (char)(0x80 | (cp >> 6 & 0x3F));
      s += (char)(0x80 | (cp & 0x3F));
    }
  }

  bool parseHex4(uint32_t &out) {
    if (pos + 4 > text.size())
      return fail("truncated \\u escape");
    out = 0;
    for (int i = 0; i < 4; ++i) {
      char c = text[pos++];
      int d = c >= '0' && c <= '9'   ? c - '0'
              : c >= 'a' && c <= 'f' ? c - 'a' + 10
              : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                     : -1;
      if (d < 0)
        return fail("invalid \\u escape");
      out = out * 16 + d;
    }
    return true;
  }

  bool parseEscape(std::string &out) {
    if (pos >= text.size())
      return fail("unterminated string");
    char c = text[pos++];
    switch (c) {
    case '"': case '\\': case '/': out += c; return true;
    case 'b': out += '\b'; return true;
    case 'f': out += '\f'; return true;
    case 'n': out += '\n'; return true;
    case 'r': out += '\r'; return true;
    case 't': out += '\t'; return true;
    case 'u': {
      uint32_t cp = 0;
      if (!parseHex4(cp))
        return false;
      // A surrogate pair encodes one code point beyond the BMP.
      if (cp >= 0xD800 && cp < 0xDC00 && text.compare(pos, 2, "\\u") == 0) {
        pos += 2;
        uint32_t low = 0;
        if (!parseHex4(low))
          return false;
        cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
      }
      appendUtf8(out, cp);
      return true;
    }
    default:
      return fail(std::string("invalid escape '\\") + c + "'");
    }
  }

  bool parseString(std::string &out) {
    ++pos; // the opening quote
    while (pos < text.size()) {
      char c = text[pos++];
      if (c == '"')
        return true;
      if (c == '\\') {
        if (!parseEscape(out))
          return false;
      } else if ((unsigned char)c < 0x20) {
        return fail("control character in string");
      } else {
        out += c;
      }
    }
    return fail("unterminated string");
  }

  /// Parses `open` elements `close`, calling `element` for each.
  template <typename Fn>
  bool parseList(char close, Fn element) {
    ++pos; // the opening bracket
    skipSpace();
    if (pos < text.size() && text[pos] == close) {
      ++pos;
      return true;
    }
    while (true) {
      if (!element())
        return false;
      skipSpace();
      if (pos < text.size() && text[pos] == ',') {
        ++pos;
        continue;
      }
      if (pos < text.size() && text[pos] == close) {
        ++pos;
        return true;
      }
      return fail(std::string("expected ',' or '") + close + "'");
    }
  }

  bool parseArray(JsonValue &out, int depth) {
    out.kind_ = JsonValue::Kind::Array;
    return parseList(']', [&] {
      out.array_.emplace_back();
      return parseValue(out.array_.back(), depth + 1);
    });
  }

  bool parseObject(JsonValue &out, int depth) {
    out.kind_ = JsonValue::Kind::Object;
    return parseList('}', [&] {
      skipSpace();
      if (pos >= text.size() || text[pos] != '"')
        return fail("expected a member name");
      std::string key;
      if (!parseString(key))
        return false;
      skipSpace();
      if (pos >= text.size() || text[pos] != ':')
        return fail("expected ':'");
      ++pos;
      return parseValue(out.object_[key], depth + 1);
    });
  }
};

std::optional<JsonValue> JsonValue::parse(const std::string &text,
                                          std::string &error) {
  JsonParser parser(text);
  JsonValue root;
  if (!parser.parseDocument(root)) {
    error = parser.error;
    return std::nullopt;
  }
  return root;
}

std::string jsonQuote(const std::string &s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += char(c);
    } else if (c < 0x20) {
      char buf[8];
      snprintf(buf, sizeof(buf), "\\u%04x", c);
      out += buf;
    } else {
      out += char(c);
    }
  }
  return out + "\"";
}

} // namespace par
