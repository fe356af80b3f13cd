#include "bench/collx_bench/json.h"

#include <cmath>
#include <cstdio>

#include "bench/collx_bench/names.h"

namespace collx_bench {

std::string json_escape(const std::string& s) {
  std::string out;
  for (unsigned char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      case '\r': out += "\\r"; break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof(buf), "\\u%04x", c);
          out += buf;
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  return out;
}

void JsonWriter::before_value() {
  if (after_key_) {
    after_key_ = false;
    return;
  }
  if (!has_items_.empty()) {
    if (has_items_.back()) out_ += ", ";
    has_items_.back() = true;
  }
}

void JsonWriter::begin_object() {
  before_value();
  out_ += "{";
  has_items_.push_back(false);
}

void JsonWriter::end_object() {
  out_ += "}";
  if (!has_items_.empty()) has_items_.pop_back();
}

void JsonWriter::begin_array() {
  before_value();
  out_ += "[";
  has_items_.push_back(false);
}

void JsonWriter::end_array() {
  out_ += "]";
  if (!has_items_.empty()) has_items_.pop_back();
}

void JsonWriter::key(const std::string& k) {
  before_value();
  out_ += "\"" + json_escape(k) + "\": ";
  after_key_ = true;
}

void JsonWriter::string(const std::string& v) {
  before_value();
  out_ += "\"" + json_escape(v) + "\"";
}

void JsonWriter::number(double v) {
  before_value();
  if (!std::isfinite(v)) {
    out_ += "null";
    return;
  }
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.9g", v);
  out_ += buf;
}

void JsonWriter::integer(int64_t v) {
  before_value();
  out_ += std::to_string(v);
}

void JsonWriter::boolean(bool v) {
  before_value();
  out_ += v ? "true" : "false";
}

void JsonWriter::null() {
  before_value();
  out_ += "null";
}

namespace {

void write_cell(JsonWriter& w, const Cell& c) {
  if (!c.measured) {
    w.null();
    return;
  }
  w.begin_object();
  w.key("time_us"); w.number(c.time_us);
  w.key("algbw"); w.number(c.algbw);
  w.key("busbw"); w.number(c.busbw);
  w.key("wrong");
  if (c.checked) w.integer(c.wrong);
  else w.null();
  w.end_object();
}

void write_config(JsonWriter& w, const Report& r, const Options& o) {
  w.begin_object();
  w.key("collective"); w.string(r.collective);
  w.key("nranks"); w.integer(r.nranks);
  w.key("minimum_bytes"); w.integer(static_cast<int64_t>(o.min_bytes));
  w.key("maximum_bytes"); w.integer(static_cast<int64_t>(o.max_bytes));
  if (o.step_factor > 1) {
    w.key("step_factor"); w.integer(static_cast<int64_t>(o.step_factor));
  } else {
    w.key("step_bytes"); w.integer(static_cast<int64_t>(o.step_bytes));
  }
  w.key("warmup_iters"); w.integer(o.warmup_iters);
  w.key("iterations"); w.integer(o.iters);
  w.key("validation"); w.integer(o.check_iters);
  w.key("datatypes");
  w.begin_array();
  for (collx_datatype_t t : o.datatypes) w.string(datatype_display_name(t));
  w.end_array();
  w.key("ops");
  w.begin_array();
  for (collx_op_t op : o.ops) w.string(op_display_name(op));
  w.end_array();
  w.key("root");
  if (o.all_roots) w.string("all");
  else w.integer(o.root);
  w.key("transport"); w.string(o.transport);
  w.key("algorithm"); w.string(o.algorithm);
  w.key("timeout_s"); w.number(o.timeout_s);
  w.end_object();
}

}  // namespace

std::string report_json(const Report& r, const Options& o) {
  JsonWriter w;
  w.begin_object();
  w.key("tool"); w.string(r.tool);
  w.key("version"); w.string(r.version);
  w.key("library_version"); w.string(r.library_version);
  w.key("collective"); w.string(r.collective);
  w.key("config"); write_config(w, r, o);
  w.key("ranks");
  w.begin_array();
  for (const RankInfo& ri : r.ranks) {
    w.begin_object();
    w.key("rank"); w.integer(ri.rank);
    w.key("pid"); w.integer(ri.pid);
    w.key("host"); w.string(ri.host);
    w.key("local_rank"); w.integer(ri.local_rank);
    w.end_object();
  }
  w.end_array();
  w.key("results");
  w.begin_array();
  for (const RowResult& row : r.rows) {
    w.begin_object();
    w.key("size"); w.integer(static_cast<int64_t>(row.bytes));
    w.key("count"); w.integer(static_cast<int64_t>(row.count));
    w.key("type"); w.string(row.type);
    w.key("redop"); w.string(row.redop);
    w.key("root"); w.integer(row.root);
    w.key("algorithm"); w.string(row.algorithm);
    w.key("out_of_place"); write_cell(w, row.out_of_place);
    w.key("in_place"); write_cell(w, row.in_place);
    w.end_object();
  }
  w.end_array();
  w.key("wrong_total"); w.integer(r.wrong_total);
  w.key("avg_busbw"); w.number(r.avg_busbw);
  w.key("errors");
  w.begin_array();
  for (const std::string& e : r.errors) w.string(e);
  w.end_array();
  w.end_object();
  return w.text() + "\n";
}

double average_busbw(const std::vector<RowResult>& rows) {
  double sum = 0;
  int n = 0;
  for (const RowResult& row : rows) {
    for (const Cell* c : {&row.out_of_place, &row.in_place}) {
      if (!c->measured) continue;
      sum += c->busbw;
      ++n;
    }
  }
  return n ? sum / n : 0.0;
}

}  // namespace collx_bench
