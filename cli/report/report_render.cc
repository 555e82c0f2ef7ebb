#include "cli/report/report_render.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "fmt/core.h"

namespace psbench::report {
namespace {

std::string Html(const std::string& text) {
  return absl::StrReplaceAll(text, {{"&", "&amp;"}, {"<", "&lt;"}, {">", "&gt;"}, {"\"", "&quot;"}});
}

constexpr char kStyle[] = R"css(
body { font-family: "DejaVu Sans", Helvetica, Arial, sans-serif; margin: 2em auto; max-width: 1200px;
       color: #222; line-height: 1.4; padding: 0 1em; }
h1 { font-size: 1.6em; border-bottom: 2px solid #444; padding-bottom: .2em; }
h2 { font-size: 1.25em; margin-top: 2em; border-bottom: 1px solid #aaa; }
dl.header { display: grid; grid-template-columns: max-content auto; gap: .2em 1em; font-size: .92em; }
dl.header dt { font-weight: bold; }
dl.header dd { margin: 0; }
p.note { font-size: .9em; color: #444; margin: .2em 0; }
div.scroll { overflow-x: auto; }
table { border-collapse: collapse; font-size: .85em; margin: .8em 0; }
th, td { border: 1px solid #bbb; padding: .2em .55em; }
th { background: #eee; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
tr:nth-child(even) td { background: #f8f8f8; }
div.plots { display: block; }
figure { margin: 1.5em 0; }
figure img { width: 100%; height: auto; border: 1px solid #ddd; }
figcaption { font-size: .9em; color: #333; }
ul.notes { font-size: .9em; color: #444; }
)css";

// Runs when every image has loaded or failed: a decoded image has a natural width.
constexpr char kScript[] = R"js(
window.addEventListener('load', function () {
  var plots = document.querySelectorAll('img.plot'), loaded = 0;
  for (var i = 0; i < plots.length; i++) {
    if (plots[i].complete && plots[i].naturalWidth > 0) loaded++;
  }
  document.body.setAttribute('data-plots-loaded', String(loaded));
});
)js";

}  // namespace

std::string RenderMarkdown(const Report& report) {
  std::string out = "# psbench report\n\n";
  for (const auto& [key, text] : report.header) out += fmt::format("- **{}:** {}\n", key, text);
  for (const Table& t : report.tables) out += psbench::RenderMarkdown(t);
  if (!report.notes.empty()) {
    out += "\n## Notes\n\n";
    for (const auto& n : report.notes) out += "- " + n + "\n";
  }
  return out;
}

std::string RenderHtml(const Report& report, const std::string& plot_dir) {
  std::string out = fmt::format(
      "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
      "<title>psbench report</title>\n<style>{}</style>\n</head>\n"
      "<body data-plots=\"{}\" data-plots-loaded=\"pending\">\n<h1>psbench report</h1>\n<dl class=\"header\">\n",
      kStyle, report.plots.size());
  for (const auto& [key, text] : report.header) {
    out += fmt::format("<dt>{}</dt><dd>{}</dd>\n", Html(key), Html(text));
  }
  out += "</dl>\n";
  for (const Table& t : report.tables) out += psbench::RenderHtml(t);
  if (!report.plots.empty()) {
    out += "<h2 id=\"plots\">Plots</h2>\n<div class=\"plots\">\n";
    for (const Plot& p : report.plots) {
      out += fmt::format(
          "<figure><img class=\"plot\" src=\"{}/{}\" alt=\"{}\"><figcaption><b>{}.</b> {}</figcaption></figure>\n",
          Html(plot_dir), Html(p.file), Html(p.title), Html(p.title), Html(p.caption));
    }
    out += "</div>\n";
  }
  if (!report.notes.empty()) {
    out += "<h2 id=\"notes\">Notes</h2>\n<ul class=\"notes\">\n";
    for (const auto& n : report.notes) out += fmt::format("<li>{}</li>\n", Html(n));
    out += "</ul>\n";
  }
  out += fmt::format("<script>{}</script>\n</body>\n</html>\n", kScript);
  return out;
}

}  // namespace psbench::report
