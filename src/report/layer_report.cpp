// The report's page: the header, each chart inline with the table of its numbers, and the JSON of
// every number drawn. Nothing is loaded from elsewhere, so the page opens offline and can be mailed.
#include <algorithm>

#include "report/layer_report.h"
#include "report/svg.h"
#include "report/table.h"

namespace census {
namespace {

using nlohmann::ordered_json;

constexpr const char* kStyle = R"(
body { font-family: "DejaVu Sans", Helvetica, Arial, sans-serif; color: #222; margin: 24px auto; max-width: 1000px; }
h1 { font-size: 22px; margin-bottom: 4px; }
h2 { font-size: 17px; margin-top: 32px; border-bottom: 1px solid #ddd; padding-bottom: 4px; }
p.note { color: #555; font-size: 13px; margin: 4px 0 10px; }
table { border-collapse: collapse; font-size: 12px; margin: 8px 0; }
th, td { padding: 2px 10px; border-bottom: 1px solid #eee; text-align: left; }
td.n { text-align: right; font-variant-numeric: tabular-nums; }
dl.options { display: grid; grid-template-columns: max-content auto; gap: 2px 14px; font-size: 13px; }
dl.options dt { color: #555; }
dl.options dd { margin: 0; }
#tip { position: fixed; display: none; background: #fff; border: 1px solid #999; padding: 6px 8px;
       font-size: 12px; pointer-events: none; box-shadow: 1px 1px 4px rgba(0,0,0,.2); }
)";

// Hover details for the timeline: the bucket under the pointer, band by band, from the embedded JSON.
constexpr const char* kScript = R"(
(function () {
  var data = JSON.parse(document.getElementById('census-data').textContent).timeline;
  var area = document.querySelector('#timeline .hover-area'), tip = document.getElementById('tip');
  if (!area) return;
  function mib(b) { return (b / 1048576).toFixed(2) + ' MiB'; }
  area.addEventListener('mousemove', function (e) {
    var box = area.getBoundingClientRect(), ops = data.forward_ops + data.backward_ops;
    var op = Math.floor((e.clientX - box.left) / box.width * ops), row = null;
    data.buckets.forEach(function (b) { if (b[0] <= op && op <= b[1]) row = b; });
    if (!row) return;
    var lines = ['ops ' + row[0] + '-' + row[1] + (row[0] >= data.forward_ops ? ' (backward)' : ' (forward)')];
    var total = 0;
    data.bands.forEach(function (name, i) { var v = row[i + 2]; total += v; if (v) lines.push(name + ': ' + mib(v)); });
    lines.push('total: ' + mib(total));
    tip.innerHTML = lines.join('<br>');
    tip.style.left = (e.clientX + 14) + 'px'; tip.style.top = (e.clientY + 10) + 'px'; tip.style.display = 'block';
  });
  area.addEventListener('mouseleave', function () { tip.style.display = 'none'; });
})();
)";

std::string text(const ordered_json& value) {
  return value.is_string() ? escape_xml(value.get<std::string>()) : escape_xml(value.dump());
}

std::string cell(const std::string& content, bool number = false) {
  return std::string(number ? "<td class=\"n\">" : "<td>") + content + "</td>";
}

std::string bytes_cells(int64_t bytes) { return cell(grouped(bytes), true) + cell(human_bytes(bytes), true); }

const std::string& chart(const Report& report, const std::string& name) {
  for (const auto& [stem, svg] : report.charts)
    if (stem == name) return svg;
  static const std::string kNone;
  return kNone;
}

std::string timeline_section(const Report& report) {
  const Timeline& t = report.timeline;
  const ordered_json& data = report.data;
  std::string html = "<h2>Where the layer's memory goes, op by op</h2>\n<p class=\"note\">Live bytes over the " +
                     std::to_string(t.forward_ops) + " ops of the forward and the " + std::to_string(t.backward_ops) +
                     " of the backward, stacked by what holds them: the saved-op class for storages autograd "
                     "saved, <b>forward</b> for the forward's other storages, <b>backward</b> for the backward's "
                     "temporaries and the activations' gradients. The layer's output is left out, as the census "
                     "leaves it out. The parameters' gradients are the band <b>parameter grads</b>: the census "
                     "counts them to find the backward's peak, not in <i>working</i>. The chart's highest point "
                     "in the backward is working plus that band. Each pixel is the highest moment of its ops.</p>\n";
  if (t.selective)
    html += "<p class=\"note\">Under HyperParallel's selective checkpointing the forward keeps the layer's "
            "input (saved by the checkpoint, <b>other</b>) and the outputs the policy caches (<b>forward</b>, with "
            "the positions the model embeds once for all layers: counted in working, not kept). The backward "
            "re-runs the forward: what the re-run makes, and its holders keep for the backward, is "
            "<b>backward</b>.</p>\n";
  html += chart(report, "timeline");
  html += "<table><tr><th></th><th>bytes</th><th></th><th>per token</th></tr>";
  const double s = data["options"]["seq_length"].get<double>();
  if (t.selective)
    html += "<tr><td>kept (at the forward's end)</td>" + bytes_cells(t.kept_bytes) + cell(decimal(t.kept_bytes / s), true) + "</tr>";
  else
    html += "<tr><td>saved (at the forward's end)</td>" + bytes_cells(t.saved_bytes) + cell(decimal(t.saved_bytes / s), true) + "</tr>";
  html += "<tr><td>working (the backward's peak, at op " + std::to_string(t.peak_op) + ")</td>" +
          bytes_cells(t.working_bytes) + cell(decimal(t.working_bytes / s), true) + "</tr>";
  html += "<tr><td>parameter grads live then</td>" + bytes_cells(t.at_peak.bytes[kParameterGradBand]) + cell("") + "</tr></table>\n";
  const size_t shown = std::min<size_t>(t.live_at_peak.size(), 25);
  html += "<p class=\"note\">Storages live at the backward's peak, largest first" +
          (shown < t.live_at_peak.size() ? " (the " + std::to_string(shown) + " largest of " +
                                               std::to_string(t.live_at_peak.size()) + "; the JSON lists all)"
                                         : std::string()) +
          ".</p>\n<table id=\"live-at-peak\"><tr><th>bytes</th><th></th><th>band</th><th>module</th><th>aten op</th>"
          "<th>shape</th><th>dtype</th></tr>";
  for (size_t i = 0; i < shown; ++i) {
    const LiveStorage& row = t.live_at_peak[i];
    html += "<tr>" + bytes_cells(row.bytes) + cell(escape_xml(row.band)) +
            cell(escape_xml(row.module.empty() ? "(layer)" : row.module)) + cell(escape_xml(row.aten_op)) +
            cell(escape_xml(row.shape.str())) + cell(escape_xml(row.dtype)) + "</tr>";
  }
  return html + "</table>\n";
}

std::string saved_section(const Report& report) {
  const ordered_json& data = report.data;
  std::string html = "<h2>Saved bytes by op class and by module</h2>\n<p class=\"note\">By the op of the cost "
                     "model's op vector whose backward takes them (the plain layer), and by the innermost module "
                     "that made them: what the plain layer saves beside what HyperParallel's selective "
                     "checkpointing keeps (its input and the outputs the policy saves; the policy's outputs have "
                     "no op class). Selective keeps " +
                     grouped(data["layer"]["selective"]["saved"].get<int64_t>()) + " bytes, its backward holds " +
                     grouped(data["layer"]["selective"]["working"].get<int64_t>()) + " at most.</p>\n";
  html += chart(report, "saved-by-op") + chart(report, "saved-by-module");
  return html;
}

std::string kinds_section(const Report& report) {
  const ordered_json& kinds = report.data["activations"];
  std::string html = "<h2>Every layer kind of the stack</h2>\n<p class=\"note\">Bytes per token, censused on each "
                     "kind's first layer; a rank of TP t holds x + x_tp / t. The output layer (final norm, LM head, "
                     "loss) splits by its vocabulary.</p>\n";
  html += chart(report, "layer-kinds");
  html += "<table id=\"layer-kinds-table\"><tr><th>kind</th>";
  for (const char* field : {"saved", "saved_tp", "working", "working_tp", "selective", "selective_tp"})
    html += std::string("<th>") + field + "</th>";
  html += "</tr>";
  for (const auto& [kind, k] : kinds.items()) {
    html += "<tr>" + cell(escape_xml(kind));
    for (const char* field : {"saved", "saved_tp", "working", "working_tp", "selective", "selective_tp"})
      html += cell(k.contains(field) ? decimal(k[field].get<double>()) : "", true);
    html += "</tr>";
  }
  return html + "</table>\n";
}

std::string sweep_section(const Report& report) {
  const ordered_json& sweep = report.data["sequence_length"];
  std::string html = "<h2>Memory against sequence length</h2>\n<p class=\"note\">The same layer censused at each "
                     "length (not extrapolated). On these log axes a line of slope one grows linearly; eager "
                     "attention's scores and chunk padding bend it.</p>\n";
  html += chart(report, "sequence-length");
  html += "<table id=\"sequence-length-table\"><tr><th>tokens</th><th>saved</th><th>working</th><th>selective</th>"
          "<th>selective working</th></tr>";
  for (const ordered_json& p : sweep["points"])
    html += "<tr>" + cell(std::to_string(p["seq_length"].get<int64_t>()), true) +
            cell(grouped(p["saved"].get<int64_t>()), true) + cell(grouped(p["working"].get<int64_t>()), true) +
            cell(grouped(p["selective"].get<int64_t>()), true) +
            cell(grouped(p["selective_working"].get<int64_t>()), true) + "</tr>";
  html += "</table>\n";
  for (const ordered_json& r : sweep["refused"])
    html += "<p class=\"note refused\">" + std::to_string(r["seq_length"].get<int64_t>()) +
            " tokens: not censused, the census refuses it (" + text(r["refusal"]) + ")</p>\n";
  return html;
}

}  // namespace

std::string report_html(const Report& report) {
  const ordered_json& data = report.data;
  std::string html = "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>Census report: " +
                     escape_xml(report.title) + "</title>\n<style>" + kStyle + "</style>\n</head>\n<body>\n";
  html += "<h1>Census report: " + escape_xml(report.title) + "</h1>\n<dl class=\"options\">";
  html += "<dt>model</dt><dd>" + text(data["model"]) + " (" + text(data["model_type"]) + ")</dd>";
  html += "<dt>config</dt><dd>" + text(data["config_source"]) + "</dd>";
  for (const auto& [option, value] : data["options"].items())
    html += "<dt>" + escape_xml(option) + "</dt><dd>" + (value.is_null() ? "none" : text(value)) + "</dd>";
  html += "<dt>Census</dt><dd>" + text(data["census_version"]) + "</dd></dl>\n";
  html += timeline_section(report) + saved_section(report) + kinds_section(report) + sweep_section(report);
  // The numbers drawn, as JSON; "</" is escaped so no value can close the script element.
  std::string json = data.dump();
  for (size_t at = json.find("</"); at != std::string::npos; at = json.find("</", at + 3)) json.replace(at, 2, "<\\/");
  html += "<div id=\"tip\"></div>\n<script type=\"application/json\" id=\"census-data\">" + json + "</script>\n";
  html += "<script>" + std::string(kScript) + "</script>\n</body>\n</html>\n";
  return html;
}

}  // namespace census
