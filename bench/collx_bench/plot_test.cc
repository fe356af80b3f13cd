// Unit tests of the --plot SVG writer and the --json reader (bench/collx_bench/plot.h).
#include "bench/collx_bench/plot.h"

#include <gtest/gtest.h>

#include <cctype>
#include <limits>

#include <string>
#include <vector>

namespace collx_bench {
namespace {

size_t count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

// A small well-formedness check: every tag closes in order, attributes are quoted, no raw
// '&' or '<' in text. Enough for the writer's output (no comments, CDATA or DOCTYPE).
bool well_formed(const std::string& xml, std::string* why) {
  std::vector<std::string> open;
  size_t i = 0;
  if (xml.compare(0, 5, "<?xml") == 0) i = xml.find("?>") + 2;
  bool root_seen = false;
  while (i < xml.size()) {
    if (xml[i] == '&') {
      const size_t semi = xml.find(';', i);
      const std::string ent = xml.substr(i, semi == std::string::npos ? 0 : semi - i + 1);
      if (ent != "&amp;" && ent != "&lt;" && ent != "&gt;" && ent != "&quot;" && ent != "&apos;") {
        *why = "bad entity at " + std::to_string(i);
        return false;
      }
      i = semi + 1;
      continue;
    }
    if (xml[i] != '<') {
      if (xml[i] == '>') { *why = "raw '>' in text"; return false; }
      if (open.empty() && !std::isspace(static_cast<unsigned char>(xml[i]))) { *why = "text outside the root"; return false; }
      ++i;
      continue;
    }
    // A tag: scan to its end, respecting quoted attribute values.
    size_t j = i + 1;
    char quote = 0;
    for (; j < xml.size(); ++j) {
      if (quote) {
        if (xml[j] == quote) quote = 0;
        else if (xml[j] == '<') { *why = "'<' inside an attribute"; return false; }
      } else if (xml[j] == '"' || xml[j] == '\'') {
        quote = xml[j];
      } else if (xml[j] == '>') {
        break;
      }
    }
    if (j >= xml.size()) { *why = "unterminated tag"; return false; }
    std::string tag = xml.substr(i + 1, j - i - 1);
    const bool closing = !tag.empty() && tag[0] == '/';
    const bool self_closing = !tag.empty() && tag.back() == '/';
    std::string name = tag.substr(closing ? 1 : 0);
    name = name.substr(0, name.find_first_of(" \t\n/"));
    if (closing) {
      if (open.empty() || open.back() != name) { *why = "mismatched </" + name + ">"; return false; }
      open.pop_back();
    } else if (!self_closing) {
      if (open.empty() && root_seen) { *why = "two roots"; return false; }
      open.push_back(name);
      root_seen = true;
    } else if (open.empty()) {
      *why = "self-closing root";
      return false;
    }
    i = j + 1;
  }
  if (!open.empty()) { *why = "unclosed <" + open.back() + ">"; return false; }
  if (!root_seen) { *why = "no root"; return false; }
  return true;
}

PlotSpec sample() {
  PlotSpec spec;
  spec.title = "allreduce, np 4, float";
  PlotSeries a{"collx out-of-place", {}}, b{"mpi <baseline> & co", {}};
  for (double bytes = 8; bytes <= (64 << 20); bytes *= 8) {
    a.points.push_back({bytes, bytes / 1e7});
    b.points.push_back({bytes, bytes / 2e7});
  }
  spec.series = {a, b};
  return spec;
}

TEST(PlotSvg, WellFormedWithOnePolylinePerSeries) {
  const std::string svg = plot_svg(sample());
  std::string why;
  EXPECT_TRUE(well_formed(svg, &why)) << why << "\n" << svg;
  EXPECT_EQ(count(svg, "<polyline"), 2u);
  EXPECT_NE(svg.find("<svg xmlns=\"http://www.w3.org/2000/svg\""), std::string::npos);
}

TEST(PlotSvg, AxesTicksLegendAndTitle) {
  const std::string svg = plot_svg(sample());
  EXPECT_NE(svg.find("size (bytes, log2 scale)"), std::string::npos);
  EXPECT_NE(svg.find("busbw (GB/s)"), std::string::npos);
  EXPECT_NE(svg.find(">allreduce, np 4, float</text>"), std::string::npos);
  EXPECT_NE(svg.find(">16</text>"), std::string::npos);  // 8 B..64 MiB: every other power of 2
  EXPECT_NE(svg.find(">1K</text>"), std::string::npos);
  EXPECT_NE(svg.find(">1M</text>"), std::string::npos);
  EXPECT_NE(svg.find(">16M</text>"), std::string::npos);
  // Legend labels escaped.
  EXPECT_NE(svg.find(">mpi &lt;baseline&gt; &amp; co</text>"), std::string::npos);
  EXPECT_NE(svg.find(">collx out-of-place</text>"), std::string::npos);
}

TEST(PlotSvg, EmptyAndOnePointSeries) {
  PlotSpec spec;
  spec.title = "t";
  spec.series = {PlotSeries{"empty", {}}, PlotSeries{"one", {{1 << 20, 3.5}}}};
  const std::string svg = plot_svg(spec);
  std::string why;
  EXPECT_TRUE(well_formed(svg, &why)) << why << "\n" << svg;
  EXPECT_EQ(count(svg, "<polyline"), 2u);
  EXPECT_EQ(count(svg, "<circle"), 1u);  // the lone point is visible
  EXPECT_NE(svg.find("empty (no data)"), std::string::npos);
  EXPECT_NE(svg.find(">1M</text>"), std::string::npos);

  PlotSpec none;  // no series at all: still a valid picture with axes
  EXPECT_TRUE(well_formed(plot_svg(none), &why)) << why;
  EXPECT_EQ(count(plot_svg(none), "<polyline"), 0u);
}

TEST(PlotSvg, IgnoresNonFiniteAndZeroSizes) {
  PlotSpec spec;
  spec.series = {PlotSeries{"s", {{0, 1}, {1024, std::numeric_limits<double>::infinity()}, {2048, 2}, {4096, 3}}}};
  const std::string svg = plot_svg(spec);
  std::string why;
  EXPECT_TRUE(well_formed(svg, &why)) << why;
  EXPECT_EQ(svg.find("inf"), std::string::npos);
  EXPECT_EQ(svg.find("nan"), std::string::npos);
}

TEST(PlotLabels, SizesAndPaths) {
  EXPECT_EQ(size_label(8), "8");
  EXPECT_EQ(size_label(1024), "1K");
  EXPECT_EQ(size_label(65536), "64K");
  EXPECT_EQ(size_label(1 << 20), "1M");
  EXPECT_EQ(size_label(1ull << 30), "1G");
  EXPECT_EQ(label_from_path("runs/mpi-np4.json"), "mpi-np4");
  EXPECT_EQ(label_from_path("plain"), "plain");
  EXPECT_EQ(xml_escape("a<b>&\"'"), "a&lt;b&gt;&amp;&quot;&apos;");
}

const char* kDoc = R"({"tool": "collx-mpi-bench", "version": "0.1.0", "library_version": "Open MPI",
  "collective": "allreduce", "config": {"collective": "allreduce", "nranks": 4},
  "ranks": [], "results": [
   {"size": 1048576, "count": 262144, "type": "float", "redop": "sum", "root": -1, "algorithm": "mpi",
    "out_of_place": {"time_us": 100, "algbw": 10.5, "busbw": 15.75, "wrong": 0},
    "in_place": {"time_us": 100, "algbw": 10, "busbw": 15, "wrong": null}},
   {"size": 8, "count": 2, "type": "float", "redop": "sum", "root": -1, "algorithm": "mpi",
    "out_of_place": {"time_us": 5, "algbw": 0.0016, "busbw": 0.0024, "wrong": 0},
    "in_place": null}],
  "wrong_total": 0, "avg_busbw": 1.0, "errors": []})";

TEST(PlotJson, ReadsBothPlacementsSortedBySize) {
  std::vector<PlotSeries> series;
  std::string title, error;
  ASSERT_TRUE(series_from_json(kDoc, "mpi", &series, &title, &error)) << error;
  ASSERT_EQ(series.size(), 2u);
  EXPECT_EQ(series[0].label, "mpi out-of-place");
  EXPECT_EQ(series[1].label, "mpi in-place");
  ASSERT_EQ(series[0].points.size(), 2u);
  EXPECT_EQ(series[0].points[0].bytes, 8);
  EXPECT_DOUBLE_EQ(series[0].points[1].busbw, 15.75);
  EXPECT_EQ(series[1].points.size(), 1u);  // the null in-place cell is skipped
  EXPECT_EQ(title, "allreduce, np 4, float");
}

TEST(PlotJson, LabelFieldAndSeveralDatatypes) {
  const std::string doc = R"({"label": "collx ring", "collective": "allreduce", "results": [
    {"size": 64, "type": "float", "redop": "sum", "root": -1, "out_of_place": {"busbw": 1}, "in_place": null},
    {"size": 64, "type": "half", "redop": "sum", "root": -1, "out_of_place": {"busbw": 2}, "in_place": null}]})";
  std::vector<PlotSeries> series;
  std::string title, error;
  ASSERT_TRUE(series_from_json(doc, "file", &series, &title, &error)) << error;
  ASSERT_EQ(series.size(), 2u);
  EXPECT_EQ(series[0].label, "collx ring float out-of-place");
  EXPECT_EQ(series[1].label, "collx ring half out-of-place");
  EXPECT_EQ(title, "allreduce, several datatypes");
}

TEST(PlotJson, RejectsOtherText) {
  std::vector<PlotSeries> series;
  std::string error;
  EXPECT_FALSE(series_from_json("", "x", &series, nullptr, &error));
  EXPECT_FALSE(series_from_json("{\"results\": [1, 2", "x", &series, nullptr, &error));
  EXPECT_NE(error.find("invalid JSON"), std::string::npos);
  EXPECT_FALSE(series_from_json("{\"a\": 1}", "x", &series, nullptr, &error));
  EXPECT_NE(error.find("results"), std::string::npos);
  EXPECT_FALSE(series_from_json("{\"results\": [{\"type\": \"float\"}]}", "x", &series, nullptr, &error));
  EXPECT_FALSE(series_from_json("{\"results\": []} trailing", "x", &series, nullptr, &error));
  EXPECT_TRUE(series_from_json("{\"results\": []}", "x", &series, nullptr, &error)) << error;
  EXPECT_TRUE(series.empty());
}

}  // namespace
}  // namespace collx_bench
