// collx-bench --plot: busbw against size as a hand-written SVG, and the reading of earlier
// --json documents (collx-bench's or collx-mpi-bench's, which share one shape) into series.
// Pure functions: text in, text out; main.cc does the file I/O.
#pragma once

#include <string>
#include <vector>

namespace collx_bench {

struct PlotPoint {
  double bytes = 0;  // x: the size column (total buffer bytes)
  double busbw = 0;  // y: GB/s
};

struct PlotSeries {
  std::string label;
  std::vector<PlotPoint> points;  // drawn in the order given (sorted by the readers)
};

struct PlotSpec {
  std::string title;
  std::vector<PlotSeries> series;
  int width = 960;
  int height = 600;
};

// The SVG document: a log2 x axis (sizes labelled 8, 1K, 64K, 1M, ...), a linear busbw y axis
// from 0, one <polyline> per series (a series with one point draws a marker too; an empty
// series is listed in the legend with "(no data)"), a legend and the title. Always
// well-formed XML, whatever the labels contain.
std::string plot_svg(const PlotSpec& spec);

// "8", "1K", "64K", "1M", "1G" for powers of 1024; "1.5K" style otherwise.
std::string size_label(double bytes);

// Escapes &, <, >, " and ' for XML text and attributes.
std::string xml_escape(const std::string& text);

// Series from one --json document: out-of-place and in-place busbw per size, split by
// datatype/op/root when the document holds several. Labels start with the document's
// "label" field when present, else `fallback_label`. A placement with no measured cell
// (alltoall's in-place) gives no series. *title_hint gets "COLL, np N, TYPE" from the
// document. False with *error set when the text is not such a document.
bool series_from_json(const std::string& text, const std::string& fallback_label,
                      std::vector<PlotSeries>* out, std::string* title_hint, std::string* error);

// A file name without directories and a trailing ".json": "runs/mpi-np4.json" -> "mpi-np4".
std::string label_from_path(const std::string& path);

}  // namespace collx_bench
