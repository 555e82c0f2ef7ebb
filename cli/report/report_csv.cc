#include "cli/report/report_csv.h"

#include <map>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace psbench::report {
namespace {

using nlohmann::json;

// A scalar as a cell: strings as they are, numbers as JSON writes them, null empty.
std::string Scalar(const json& v) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_null()) return "";
  return v.dump();
}

bool AllScalars(const json& array) {
  for (const json& v : array) {
    if (v.is_object() || v.is_array()) return false;
  }
  return true;
}

// "TEXT" with its quotes doubled, as CSV quotes a cell.
std::string InQuotes(const std::string& text) {
  std::string out = "\"";
  for (char c : text) {
    if (c == '"') out += '"';
    out += c;
  }
  return out + "\"";
}

// A key as a part of a column name. A key a column name cannot tell apart (one with a dot, one
// that starts with a quote, an empty one, a record's own "source") is quoted, quotes doubled:
// {"a.b": 1} and {"a": {"b": 2}} are the columns "a.b" and a.b, not one column keeping one value.
std::string ColumnKey(const std::string& key, bool top) {
  if (!key.empty() && key.find('.') == std::string::npos && key[0] != '"' && !(top && key == "source")) return key;
  return InQuotes(key);
}

void Flatten(const json& v, const std::string& path, std::vector<std::pair<std::string, std::string>>& out) {
  if (v.is_object()) {
    for (const auto& [key, child] : v.items()) {
      Flatten(child, path.empty() ? ColumnKey(key, true) : absl::StrCat(path, ".", ColumnKey(key, false)), out);
    }
  } else if (v.is_array() && AllScalars(v)) {
    std::vector<std::string> cells;
    for (const json& e : v) cells.push_back(Scalar(e));
    out.emplace_back(path, absl::StrJoin(cells, " "));
  } else if (v.is_array()) {
    for (size_t i = 0; i < v.size(); ++i) Flatten(v[i], absl::StrCat(path, ".", i), out);
  } else {
    out.emplace_back(path, Scalar(v));
  }
}

std::string Quoted(const std::string& cell) {
  return cell.find_first_of(",\"\r\n") == std::string::npos ? cell : InQuotes(cell);
}

}  // namespace

std::string RenderCsv(const std::vector<Input>& records) {
  std::vector<std::string> columns = {"source"};
  std::map<std::string, size_t> index = {{"source", 0}};
  std::vector<std::map<size_t, std::string>> rows;
  for (const Input& r : records) {
    std::vector<std::pair<std::string, std::string>> cells;
    Flatten(RecordToJson(r.record), "", cells);
    std::map<size_t, std::string> row = {{0, r.where}};
    for (auto& [column, value] : cells) {
      auto [it, added] = index.emplace(column, columns.size());
      if (added) columns.push_back(column);
      row[it->second] = std::move(value);
    }
    rows.push_back(std::move(row));
  }
  std::string out;
  std::vector<std::string> quoted;
  for (const std::string& c : columns) quoted.push_back(Quoted(c));
  absl::StrAppend(&out, absl::StrJoin(quoted, ","), "\r\n");
  for (const auto& row : rows) {
    std::vector<std::string> line(columns.size());
    for (const auto& [i, value] : row) line[i] = Quoted(value);
    absl::StrAppend(&out, absl::StrJoin(line, ","), "\r\n");
  }
  return out;
}

}  // namespace psbench::report
