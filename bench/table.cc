#include "bench/table.h"

#include <algorithm>
#include <cctype>

#include "absl/strings/str_replace.h"
#include "fmt/core.h"

namespace psbench {
namespace {

// Characters on screen: UTF-8 continuation bytes ("µ") take no column of their own.
size_t Width(const std::string& s) {
  size_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;
  return n;
}

std::string Pad(const std::string& s, size_t width, bool right) {
  size_t w = Width(s);
  std::string fill(width > w ? width - w : 0, ' ');
  return right ? fill + s : s + fill;
}

// A '|' inside a cell would end it, and a line break the table (a record's label may hold one).
std::string MdCell(const std::string& text) {
  return absl::StrReplaceAll(text, {{"|", "\\|"}, {"\r\n", " "}, {"\n", " "}, {"\r", " "}});
}

std::string Html(const std::string& text) {
  return absl::StrReplaceAll(text, {{"&", "&amp;"}, {"<", "&lt;"}, {">", "&gt;"}, {"\"", "&quot;"}});
}

// A column is numeric when its first row's cell is: the first column names the row.
bool RightAligned(const Table& t, size_t i) {
  return i > 0 && !t.rows.empty() && i < t.rows[0].size() && NumericCell(t.rows[0][i]);
}

}  // namespace

std::string Table::FullColumn(size_t i) const {
  size_t at = 0;
  for (const Group& g : groups) {
    if (i < at + g.span) return g.title.empty() ? columns[i] : g.title + " " + columns[i];
    at += g.span;
  }
  return columns[i];
}

bool NumericCell(const std::string& cell) {
  if (cell == "-") return true;
  size_t i = cell.rfind('~', 0) == 0 || cell.rfind('-', 0) == 0 ? 1 : 0;
  const size_t digits = i;
  while (i < cell.size() && (std::isdigit(static_cast<unsigned char>(cell[i])) || cell[i] == '.')) ++i;
  if (i == digits) return false;
  // A unit may follow ("1.25x", "42%", "3.03MiB"); more digits after it make it text ("3x1MiB").
  for (; i < cell.size(); ++i) {
    if (std::isdigit(static_cast<unsigned char>(cell[i])) || cell[i] == ' ') return false;
  }
  return true;
}

std::string RenderText(const Table& t) {
  const size_t n = t.columns.size();
  std::vector<size_t> width(n);
  for (size_t i = 0; i < n; ++i) {
    width[i] = Width(t.columns[i]);
    for (const auto& row : t.rows) {
      if (i < row.size()) width[i] = std::max(width[i], Width(row[i]));
    }
  }
  constexpr size_t kGap = 2;
  // A group's title may be wider than its columns: they share the difference.
  size_t at = 0;
  for (const Table::Group& g : t.groups) {
    if (g.span == 0 || at + g.span > n) break;
    size_t span_width = (g.span - 1) * kGap;
    for (size_t i = at; i < at + g.span; ++i) span_width += width[i];
    if (Width(g.title) > span_width) {
      const size_t extra = Width(g.title) - span_width;
      for (size_t i = 0; i < g.span; ++i) width[at + i] += extra / g.span + (i < extra % g.span ? 1 : 0);
    }
    at += g.span;
  }
  std::string out = fmt::format("# {}\n", t.title);
  for (const auto& note : t.notes) out += fmt::format("# {}\n", note);
  if (!t.groups.empty()) {
    std::string line = "# ";
    at = 0;
    for (const Table::Group& g : t.groups) {
      if (at + g.span > n) break;
      size_t span_width = (g.span - 1) * kGap;
      for (size_t i = at; i < at + g.span; ++i) span_width += width[i];
      line += (at == 0 ? "" : std::string(kGap, ' ')) + Pad(g.title, span_width, true);
      at += g.span;
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out += line + "\n";
  }
  auto line = [&](const std::vector<std::string>& cells, const char* lead) {
    std::string text = lead;
    for (size_t i = 0; i < n; ++i) {
      const std::string& cell = i < cells.size() ? cells[i] : std::string("-");
      text += (i == 0 ? "" : std::string(kGap, ' ')) + Pad(cell, width[i], RightAligned(t, i));
    }
    while (!text.empty() && text.back() == ' ') text.pop_back();
    return text + "\n";
  };
  out += line(t.columns, "# ");
  for (const auto& row : t.rows) out += line(row, "  ");
  return out;
}

std::string RenderMarkdown(const Table& t) {
  std::string out = fmt::format("\n## {}\n\n", t.title);
  for (const auto& n : t.notes) out += n + "\n";
  out += "\n|";
  for (size_t i = 0; i < t.columns.size(); ++i) out += " " + MdCell(t.FullColumn(i)) + " |";
  out += "\n|";
  for (size_t i = 0; i < t.columns.size(); ++i) out += RightAligned(t, i) ? "---:|" : "---|";
  out += "\n";
  for (const auto& row : t.rows) {
    out += "|";
    for (const auto& c : row) out += " " + MdCell(c) + " |";
    out += "\n";
  }
  return out;
}

std::string RenderHtml(const Table& t) {
  std::string out = fmt::format("<h2 id=\"{}\">{}</h2>\n", Html(t.id), Html(t.title));
  for (const auto& n : t.notes) out += fmt::format("<p class=\"note\">{}</p>\n", Html(n));
  out += "<div class=\"scroll\"><table>\n";
  if (!t.groups.empty()) {
    out += "<tr>";
    for (const Table::Group& g : t.groups) {
      out += fmt::format("<th colspan=\"{}\">{}</th>", g.span, Html(g.title));
    }
    out += "</tr>\n";
  }
  out += "<tr>";
  for (size_t i = 0; i < t.columns.size(); ++i) {
    // Without a group row, a column carries its whole name.
    out += fmt::format("<th>{}</th>", Html(t.groups.empty() ? t.FullColumn(i) : t.columns[i]));
  }
  out += "</tr>\n";
  for (const auto& row : t.rows) {
    out += "<tr>";
    for (size_t i = 0; i < row.size(); ++i) {
      out += fmt::format("<td{}>{}</td>", i > 0 && NumericCell(row[i]) ? " class=\"num\"" : "", Html(row[i]));
    }
    out += "</tr>\n";
  }
  out += "</table></div>\n";
  return out;
}

void StreamingTable::PrintHeader() {
  std::string text;
  for (size_t i = 0; i < columns_.size(); ++i) {
    text += (i == 0 ? "" : " ") + Pad(columns_[i].name, columns_[i].width, true);
  }
  fmt::print(out_, "{}\n", text);
}

void StreamingTable::PrintRow(const std::vector<std::string>& cells) {
  std::string text;
  for (size_t i = 0; i < columns_.size(); ++i) {
    const std::string& cell = i < cells.size() ? cells[i] : std::string("-");
    text += (i == 0 ? "" : " ") + Pad(cell, columns_[i].width, true);
  }
  while (!text.empty() && text.back() == ' ') text.pop_back();
  fmt::print(out_, "{}\n", text);
  std::fflush(out_);
}

}  // namespace psbench
