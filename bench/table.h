// Every table psbench shows, in the terminal and in reports: one Table type and its renderers
// (aligned text, Markdown, HTML). What goes into a table is decided where the table is built;
// how it looks is decided here, once.
#ifndef PSBENCH_BENCH_TABLE_H_
#define PSBENCH_BENCH_TABLE_H_

#include <cstdio>
#include <string>
#include <vector>

namespace psbench {

struct Table {
  std::string id;                  // "latency", "train", ... (HTML anchors, tests)
  std::string title;               // "Latency"
  std::vector<std::string> notes;  // what the numbers are and how they were measured
  // Column groups over `columns` (e.g. one per series), spans adding up to the column count;
  // empty: no groups. Text shows them as a header line above the columns; Markdown, which
  // has one header line, names a column "GROUP COLUMN".
  struct Group {
    std::string title;
    size_t span = 1;
  };
  std::vector<Group> groups;
  std::vector<std::string> columns;
  std::vector<std::vector<std::string>> rows;  // formatted cells, "-" where there is none

  // A column's full name: its group's title (if any) and its own.
  std::string FullColumn(size_t i) const;
};

// Numbers, with a unit or not ("1.25x", "42%", "3.03MiB"), "~N" and "-" align right; text
// ("uniform", "3x1MiB 3x10KiB") aligns left.
bool NumericCell(const std::string& cell);

// For the terminal: "# TITLE", "# NOTE" lines, then "#"-prefixed header lines and rows, each
// column as wide as its widest cell, numbers right-aligned.
std::string RenderText(const Table& t);
std::string RenderMarkdown(const Table& t);  // "## TITLE", notes, a pipe table
std::string RenderHtml(const Table& t);      // <h2>, notes, a <table> (groups as colspan)

// A terminal table whose rows come one at a time (a row per result as it is measured):
// fixed widths, the header printed once, each row as it comes. Widths are the columns'
// minimum; a wider cell pushes the line, it is never cut.
class StreamingTable {
 public:
  struct Column {
    std::string name;
    int width;
  };
  StreamingTable(std::FILE* out, std::vector<Column> columns) : out_(out), columns_(std::move(columns)) {}
  void PrintHeader();
  void PrintRow(const std::vector<std::string>& cells);

 private:
  std::FILE* out_;
  std::vector<Column> columns_;
};

}  // namespace psbench

#endif  // PSBENCH_BENCH_TABLE_H_
