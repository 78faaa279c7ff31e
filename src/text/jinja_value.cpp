#include "text/jinja_value.h"

namespace qmpi::jinja {
namespace {

void dump_compact(const Json& j, std::string& out) {
  // Python's default separators, which nlohmann's compact dump (no spaces) does not use.
  if (j.is_object()) {
    out += '{';
    bool first = true;
    for (const auto& [k, v] : j.items()) {
      if (!first) out += ", ";
      first = false;
      out += Json(k).dump();
      out += ": ";
      dump_compact(v, out);
    }
    out += '}';
  } else if (j.is_array()) {
    out += '[';
    for (size_t i = 0; i < j.size(); ++i) {
      if (i) out += ", ";
      dump_compact(j[i], out);
    }
    out += ']';
  } else {
    out += j.dump();  // strings escape as json.dumps(ensure_ascii=False) does
  }
}

std::string py_float(double d) {
  std::string s = Json(d).dump();
  if (s.find_first_of(".eEn") == std::string::npos) s += ".0";
  return s;
}

std::string py_repr_string(const std::string& s) {
  // Python picks double quotes only when the text has a single quote and no double quote.
  const bool dq = s.find('\'') != std::string::npos && s.find('"') == std::string::npos;
  const char q = dq ? '"' : '\'';
  std::string out(1, q);
  for (char c : s) {
    if (c == q || c == '\\')
      out += '\\', out += c;
    else if (c == '\n')
      out += "\\n";
    else if (c == '\t')
      out += "\\t";
    else if (c == '\r')
      out += "\\r";
    else
      out += c;
  }
  return out + q;
}

std::string py_repr(const Json& j) {
  switch (j.type()) {
    case Json::value_t::null:
      return "None";
    case Json::value_t::boolean:
      return j.get<bool>() ? "True" : "False";
    case Json::value_t::number_float:
      return py_float(j.get<double>());
    case Json::value_t::string:
      return py_repr_string(j.get_ref<const std::string&>());
    case Json::value_t::array: {
      std::string out = "[";
      for (size_t i = 0; i < j.size(); ++i) out += (i ? ", " : "") + py_repr(j[i]);
      return out + "]";
    }
    case Json::value_t::object: {
      std::string out = "{";
      bool first = true;
      for (const auto& [k, v] : j.items()) {
        out += (first ? "" : ", ") + py_repr_string(k) + ": " + py_repr(v);
        first = false;
      }
      return out + "}";
    }
    default:
      return j.dump();
  }
}

}  // namespace

Value Value::data(Json j) {
  Value v = Value::literal(std::move(j));
  if (v.json.is_string())
    v.plain.push_back({0, v.str().size()});
  else
    v.from_data = true;
  if (v.is_string() && v.str().empty()) v.plain.clear();
  return v;
}

Value derived_string(std::string s, std::initializer_list<const Value*> inputs) {
  Value v = Value::literal(Json(std::move(s)));
  for (const Value* in : inputs)
    if (in->tainted() && !v.str().empty()) {
      v.plain = {{0, v.str().size()}};
      break;
    }
  return v;
}

Value derived(Json j, std::initializer_list<const Value*> inputs) {
  if (j.is_string()) {
    Value v = derived_string(j.get<std::string>(), inputs);
    return v;
  }
  Value v = Value::literal(std::move(j));
  for (const Value* in : inputs) v.from_data = v.from_data || in->tainted();
  return v;
}

bool truthy(const Value& v) {
  if (v.undefined) return false;
  if (v.ns) return true;
  const Json& j = v.json;
  switch (j.type()) {
    case Json::value_t::null:
      return false;
    case Json::value_t::boolean:
      return j.get<bool>();
    case Json::value_t::number_integer:
    case Json::value_t::number_unsigned:
      return j.get<int64_t>() != 0;
    case Json::value_t::number_float:
      return j.get<double>() != 0.0;
    case Json::value_t::string:
      return !v.str().empty();  // json::empty() is false for strings
    case Json::value_t::array:
    case Json::value_t::object:
      return !j.empty();
    default:
      return false;
  }
}

std::string to_text(const Value& v) {
  if (v.undefined) return "";
  if (v.ns) return "<Namespace>";
  if (v.json.is_string()) return v.str();
  return py_repr(v.json);
}

std::string py_json_dumps(const Json& j, int indent) {
  if (indent >= 0) return j.dump(indent);  // matches json.dumps(indent=n) item by item
  std::string out;
  dump_compact(j, out);
  return out;
}

std::string type_name(const Value& v) {
  if (v.undefined) return "undefined";
  if (v.ns) return "namespace";
  switch (v.json.type()) {
    case Json::value_t::null:
      return "none";
    case Json::value_t::boolean:
      return "boolean";
    case Json::value_t::number_integer:
    case Json::value_t::number_unsigned:
      return "integer";
    case Json::value_t::number_float:
      return "float";
    case Json::value_t::string:
      return "string";
    case Json::value_t::array:
      return "list";
    case Json::value_t::object:
      return "mapping";
    default:
      return "value";
  }
}

}  // namespace qmpi::jinja
