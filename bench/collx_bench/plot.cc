#include "bench/collx_bench/plot.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <set>
#include <tuple>

namespace collx_bench {

namespace {

std::string fmt(const char* format, double v) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), format, v);
  return buf;
}

// ---- A small JSON reader: enough for the bench documents (objects, arrays, strings,
// numbers, true/false/null), strict about syntax so a wrong file is reported, not plotted.
struct JValue {
  enum Kind { kNull, kBool, kNumber, kString, kArray, kObject } kind = kNull;
  bool boolean = false;
  double number = 0;
  std::string string;
  std::vector<JValue> items;
  std::vector<std::pair<std::string, JValue>> members;

  const JValue* get(const std::string& key) const {
    if (kind != kObject) return nullptr;
    for (const auto& m : members) {
      if (m.first == key) return &m.second;
    }
    return nullptr;
  }
};

class JParser {
 public:
  explicit JParser(const std::string& text) : s_(text) {}

  bool parse(JValue* out, std::string* error) {
    if (!value(out, 0)) {
      *error = "invalid JSON at offset " + std::to_string(pos_) + ": " + why_;
      return false;
    }
    skip_ws();
    if (pos_ != s_.size()) {
      *error = "invalid JSON: trailing text at offset " + std::to_string(pos_);
      return false;
    }
    return true;
  }

 private:
  void skip_ws() {
    while (pos_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[pos_]))) ++pos_;
  }
  bool fail(const char* why) {
    why_ = why;
    return false;
  }
  bool literal(const char* word) {
    const size_t n = std::char_traits<char>::length(word);
    if (s_.compare(pos_, n, word) != 0) return fail("unexpected word");
    pos_ += n;
    return true;
  }
  bool str(std::string* out) {
    ++pos_;  // opening quote
    while (pos_ < s_.size()) {
      char c = s_[pos_++];
      if (c == '"') return true;
      if (static_cast<unsigned char>(c) < 0x20) return fail("control character in a string");
      if (c != '\\') {
        *out += c;
        continue;
      }
      if (pos_ >= s_.size()) break;
      char e = s_[pos_++];
      switch (e) {
        case '"': case '\\': case '/': *out += e; break;
        case 'b': *out += '\b'; break;
        case 'f': *out += '\f'; break;
        case 'n': *out += '\n'; break;
        case 'r': *out += '\r'; break;
        case 't': *out += '\t'; break;
        case 'u': {
          if (pos_ + 4 > s_.size()) return fail("short \\u escape");
          unsigned code = 0;
          for (int i = 0; i < 4; ++i) {
            const char h = s_[pos_++];
            if (!std::isxdigit(static_cast<unsigned char>(h))) return fail("bad \\u escape");
            code = code * 16 + static_cast<unsigned>(std::isdigit(static_cast<unsigned char>(h)) ? h - '0' : (std::tolower(h) - 'a' + 10));
          }
          // Labels only: keep ASCII, replace the rest.
          *out += code < 0x80 ? static_cast<char>(code) : '?';
          break;
        }
        default: return fail("bad escape");
      }
    }
    return fail("unterminated string");
  }
  bool value(JValue* v, int depth) {
    if (depth > 64) return fail("nested too deeply");
    skip_ws();
    if (pos_ >= s_.size()) return fail("unexpected end");
    const char c = s_[pos_];
    if (c == '{') {
      v->kind = JValue::kObject;
      ++pos_;
      skip_ws();
      if (pos_ < s_.size() && s_[pos_] == '}') { ++pos_; return true; }
      while (true) {
        skip_ws();
        if (pos_ >= s_.size() || s_[pos_] != '"') return fail("expected a key");
        std::string key;
        if (!str(&key)) return false;
        skip_ws();
        if (pos_ >= s_.size() || s_[pos_] != ':') return fail("expected ':'");
        ++pos_;
        JValue member;
        if (!value(&member, depth + 1)) return false;
        v->members.emplace_back(std::move(key), std::move(member));
        skip_ws();
        if (pos_ < s_.size() && s_[pos_] == ',') { ++pos_; continue; }
        if (pos_ < s_.size() && s_[pos_] == '}') { ++pos_; return true; }
        return fail("expected ',' or '}'");
      }
    }
    if (c == '[') {
      v->kind = JValue::kArray;
      ++pos_;
      skip_ws();
      if (pos_ < s_.size() && s_[pos_] == ']') { ++pos_; return true; }
      while (true) {
        JValue item;
        if (!value(&item, depth + 1)) return false;
        v->items.push_back(std::move(item));
        skip_ws();
        if (pos_ < s_.size() && s_[pos_] == ',') { ++pos_; continue; }
        if (pos_ < s_.size() && s_[pos_] == ']') { ++pos_; return true; }
        return fail("expected ',' or ']'");
      }
    }
    if (c == '"') {
      v->kind = JValue::kString;
      return str(&v->string);
    }
    if (c == 't') { v->kind = JValue::kBool; v->boolean = true; return literal("true"); }
    if (c == 'f') { v->kind = JValue::kBool; return literal("false"); }
    if (c == 'n') { v->kind = JValue::kNull; return literal("null"); }
    if (c == '-' || std::isdigit(static_cast<unsigned char>(c))) {
      const char* begin = s_.c_str() + pos_;
      char* end = nullptr;
      v->kind = JValue::kNumber;
      v->number = std::strtod(begin, &end);
      if (end == begin) return fail("bad number");
      pos_ += static_cast<size_t>(end - begin);
      return true;
    }
    return fail("unexpected character");
  }

  const std::string& s_;
  size_t pos_ = 0;
  std::string why_;
};

const char* const kColors[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e",
                               "#9467bd", "#8c564b", "#e377c2", "#17becf"};

// 1, 2, 2.5, 5 times a power of ten, >= v.
double nice_ceiling(double v) {
  if (!(v > 0)) return 1;
  const double p = std::pow(10.0, std::floor(std::log10(v)));
  for (double m : {1.0, 2.0, 2.5, 5.0, 10.0}) {
    if (m * p >= v * (1 - 1e-12)) return m * p;
  }
  return 10 * p;
}

std::string number_label(double v) {
  std::string s = fmt("%.3g", v);
  return s;
}

}  // namespace

std::string xml_escape(const std::string& text) {
  std::string out;
  for (unsigned char c : text) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&apos;"; break;
      default:
        // XML 1.0 forbids most control characters even escaped.
        if (c < 0x20 && c != '\t' && c != '\n' && c != '\r') out += '?';
        else out += static_cast<char>(c);
    }
  }
  return out;
}

std::string size_label(double bytes) {
  static const char* const kUnits[] = {"", "K", "M", "G", "T", "P"};
  int unit = 0;
  double v = bytes;
  while (v >= 1024 && unit < 5) {
    v /= 1024;
    ++unit;
  }
  std::string s = (v == std::floor(v)) ? fmt("%.0f", v) : fmt("%.3g", v);
  return s + kUnits[unit];
}

std::string label_from_path(const std::string& path) {
  std::string name = path;
  const size_t slash = name.find_last_of('/');
  if (slash != std::string::npos) name = name.substr(slash + 1);
  if (name.size() > 5 && name.compare(name.size() - 5, 5, ".json") == 0) name.resize(name.size() - 5);
  return name.empty() ? path : name;
}

std::string plot_svg(const PlotSpec& spec) {
  const double W = spec.width > 200 ? spec.width : 200, H = spec.height > 150 ? spec.height : 150;
  // Plot area: room for the y labels on the left, the legend on the right.
  const double left = 80, top = 50, bottom = H - 60, right = W - 230;

  double xmin = INFINITY, xmax = -INFINITY, ymax = 0;
  for (const PlotSeries& s : spec.series) {
    for (const PlotPoint& p : s.points) {
      if (!(p.bytes > 0) || !std::isfinite(p.bytes) || !std::isfinite(p.busbw)) continue;
      xmin = std::min(xmin, std::log2(p.bytes));
      xmax = std::max(xmax, std::log2(p.bytes));
      ymax = std::max(ymax, p.busbw);
    }
  }
  if (!std::isfinite(xmin)) { xmin = 3; xmax = 26; }  // nothing to draw: 8 B .. 64 MiB
  xmin = std::floor(xmin);
  xmax = std::ceil(xmax);
  if (xmax - xmin < 2) { xmin -= 1; xmax += 1; }
  if (xmin < 0) xmin = 0;
  ymax = nice_ceiling(ymax * 1.05);

  auto X = [&](double bytes) { return left + (std::log2(bytes) - xmin) / (xmax - xmin) * (right - left); };
  auto Y = [&](double busbw) { return bottom - std::max(0.0, busbw) / ymax * (bottom - top); };

  std::string o;
  o += "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  o += "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + fmt("%.0f", W) + "\" height=\"" + fmt("%.0f", H) +
       "\" viewBox=\"0 0 " + fmt("%.0f", W) + " " + fmt("%.0f", H) +
       "\" font-family=\"DejaVu Sans, Helvetica, Arial, sans-serif\" font-size=\"12\">\n";
  o += "<rect x=\"0\" y=\"0\" width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  o += "<text class=\"title\" x=\"" + fmt("%.1f", (left + right) / 2) +
       "\" y=\"28\" text-anchor=\"middle\" font-size=\"16\" font-weight=\"bold\">" +
       xml_escape(spec.title.empty() ? "collx-bench busbw" : spec.title) + "</text>\n";

  // Grid, ticks and tick labels.
  o += "<g class=\"grid\" stroke=\"#dddddd\" stroke-width=\"1\">\n";
  const int span = static_cast<int>(xmax - xmin);
  // Ticks on exponents divisible by the step; the steps divide 10 so 1K, 1M, 1G stay labelled.
  int step = 1;
  for (int candidate : {1, 2, 5, 10, 20}) {
    step = candidate;
    if (span / step <= 12) break;
  }
  std::string xticks, yticks;
  for (int e = static_cast<int>(xmin); e <= static_cast<int>(xmax); ++e) {
    if (e % step != 0) continue;
    const double x = X(std::ldexp(1.0, e));
    o += "<line x1=\"" + fmt("%.1f", x) + "\" y1=\"" + fmt("%.1f", top) + "\" x2=\"" + fmt("%.1f", x) +
         "\" y2=\"" + fmt("%.1f", bottom) + "\"/>\n";
    xticks += "<line x1=\"" + fmt("%.1f", x) + "\" y1=\"" + fmt("%.1f", bottom) + "\" x2=\"" + fmt("%.1f", x) +
              "\" y2=\"" + fmt("%.1f", bottom + 5) + "\"/>\n";
    xticks += "<text class=\"xtick\" x=\"" + fmt("%.1f", x) + "\" y=\"" + fmt("%.1f", bottom + 18) +
              "\" text-anchor=\"middle\" stroke=\"none\">" + size_label(std::ldexp(1.0, e)) + "</text>\n";
  }
  const int ysteps = 5;
  for (int i = 0; i <= ysteps; ++i) {
    const double v = ymax * i / ysteps;
    const double y = Y(v);
    o += "<line x1=\"" + fmt("%.1f", left) + "\" y1=\"" + fmt("%.1f", y) + "\" x2=\"" + fmt("%.1f", right) +
         "\" y2=\"" + fmt("%.1f", y) + "\"/>\n";
    yticks += "<line x1=\"" + fmt("%.1f", left - 5) + "\" y1=\"" + fmt("%.1f", y) + "\" x2=\"" + fmt("%.1f", left) +
              "\" y2=\"" + fmt("%.1f", y) + "\"/>\n";
    yticks += "<text class=\"ytick\" x=\"" + fmt("%.1f", left - 8) + "\" y=\"" + fmt("%.1f", y + 4) +
              "\" text-anchor=\"end\" stroke=\"none\">" + number_label(v) + "</text>\n";
  }
  o += "</g>\n";
  o += "<g class=\"axes\" stroke=\"black\" stroke-width=\"1\">\n";
  o += "<line x1=\"" + fmt("%.1f", left) + "\" y1=\"" + fmt("%.1f", bottom) + "\" x2=\"" + fmt("%.1f", right) +
       "\" y2=\"" + fmt("%.1f", bottom) + "\"/>\n";
  o += "<line x1=\"" + fmt("%.1f", left) + "\" y1=\"" + fmt("%.1f", top) + "\" x2=\"" + fmt("%.1f", left) +
       "\" y2=\"" + fmt("%.1f", bottom) + "\"/>\n";
  o += xticks + yticks;
  o += "</g>\n";
  o += "<text class=\"xlabel\" x=\"" + fmt("%.1f", (left + right) / 2) + "\" y=\"" + fmt("%.1f", H - 18) +
       "\" text-anchor=\"middle\">size (bytes, log2 scale)</text>\n";
  o += "<text class=\"ylabel\" x=\"20\" y=\"" + fmt("%.1f", (top + bottom) / 2) +
       "\" text-anchor=\"middle\" transform=\"rotate(-90 20 " + fmt("%.1f", (top + bottom) / 2) +
       ")\">busbw (GB/s)</text>\n";

  // One polyline per series; a lone point also gets a marker so it is visible.
  o += "<g class=\"series\" fill=\"none\" stroke-width=\"2\">\n";
  for (size_t i = 0; i < spec.series.size(); ++i) {
    const PlotSeries& s = spec.series[i];
    const char* color = kColors[i % (sizeof(kColors) / sizeof(kColors[0]))];
    const char* dash = (i / (sizeof(kColors) / sizeof(kColors[0]))) % 2 ? " stroke-dasharray=\"6 3\"" : "";
    std::string pts, markers;
    for (const PlotPoint& p : s.points) {
      if (!(p.bytes > 0) || !std::isfinite(p.bytes) || !std::isfinite(p.busbw)) continue;
      const std::string xy = fmt("%.1f", X(p.bytes)) + "," + fmt("%.1f", Y(p.busbw));
      pts += (pts.empty() ? "" : " ") + xy;
      markers += "<circle cx=\"" + fmt("%.1f", X(p.bytes)) + "\" cy=\"" + fmt("%.1f", Y(p.busbw)) +
                 "\" r=\"2.5\" fill=\"" + color + "\" stroke=\"none\"/>\n";
    }
    o += "<polyline stroke=\"" + std::string(color) + "\"" + dash + " points=\"" + pts + "\"><title>" +
         xml_escape(s.label) + "</title></polyline>\n";
    o += markers;
  }
  o += "</g>\n";

  // Legend, right of the plot area.
  o += "<g class=\"legend\">\n";
  const double lx = right + 20;
  for (size_t i = 0; i < spec.series.size(); ++i) {
    const PlotSeries& s = spec.series[i];
    const char* color = kColors[i % (sizeof(kColors) / sizeof(kColors[0]))];
    const char* dash = (i / (sizeof(kColors) / sizeof(kColors[0]))) % 2 ? " stroke-dasharray=\"6 3\"" : "";
    const double y = top + 10 + 20.0 * static_cast<double>(i);
    o += "<line x1=\"" + fmt("%.1f", lx) + "\" y1=\"" + fmt("%.1f", y) + "\" x2=\"" + fmt("%.1f", lx + 24) +
         "\" y2=\"" + fmt("%.1f", y) + "\" stroke=\"" + color + "\" stroke-width=\"2\"" + dash + "/>\n";
    std::string label = s.label;
    if (s.points.empty()) label += " (no data)";
    o += "<text x=\"" + fmt("%.1f", lx + 30) + "\" y=\"" + fmt("%.1f", y + 4) + "\">" + xml_escape(label) +
         "</text>\n";
  }
  o += "</g>\n</svg>\n";
  return o;
}

bool series_from_json(const std::string& text, const std::string& fallback_label,
                      std::vector<PlotSeries>* out, std::string* title_hint, std::string* error) {
  JValue doc;
  if (!JParser(text).parse(&doc, error)) return false;
  const JValue* results = doc.get("results");
  if (doc.kind != JValue::kObject || !results || results->kind != JValue::kArray) {
    *error = "not a collx-bench --json document (no \"results\" array)";
    return false;
  }
  std::string label = fallback_label;
  if (const JValue* l = doc.get("label"); l && l->kind == JValue::kString && !l->string.empty()) label = l->string;

  // Group rows by datatype/op/root; name the group only by the parts that vary.
  struct Key {
    std::string type, redop;
    int root;
    bool operator<(const Key& k) const {
      return std::tie(type, redop, root) < std::tie(k.type, k.redop, k.root);
    }
  };
  std::map<Key, std::pair<PlotSeries, PlotSeries>> groups;
  std::vector<Key> order;
  std::set<std::string> types, redops;
  std::set<int> roots;
  for (const JValue& row : results->items) {
    const JValue* size = row.get("size");
    if (!size || size->kind != JValue::kNumber) {
      *error = "a result has no numeric \"size\"";
      return false;
    }
    Key key;
    if (const JValue* t = row.get("type"); t && t->kind == JValue::kString) key.type = t->string;
    if (const JValue* r = row.get("redop"); r && r->kind == JValue::kString) key.redop = r->string;
    const JValue* root = row.get("root");
    key.root = root && root->kind == JValue::kNumber ? static_cast<int>(root->number) : -1;
    types.insert(key.type);
    redops.insert(key.redop);
    roots.insert(key.root);
    if (!groups.count(key)) order.push_back(key);
    auto& g = groups[key];
    for (int placement = 0; placement < 2; ++placement) {
      const JValue* cell = row.get(placement == 0 ? "out_of_place" : "in_place");
      const JValue* busbw = cell ? cell->get("busbw") : nullptr;
      if (!busbw || busbw->kind != JValue::kNumber) continue;
      (placement == 0 ? g.first : g.second).points.push_back({size->number, busbw->number});
    }
  }
  for (const Key& key : order) {
    auto& g = groups[key];
    std::string suffix;
    if (types.size() > 1) suffix += " " + key.type;
    if (redops.size() > 1) suffix += " " + key.redop;
    if (roots.size() > 1) suffix += " root " + std::to_string(key.root);
    for (PlotSeries* s : {&g.first, &g.second}) {
      if (s->points.empty()) continue;
      s->label = label + suffix + (s == &g.first ? " out-of-place" : " in-place");
      std::stable_sort(s->points.begin(), s->points.end(),
                       [](const PlotPoint& a, const PlotPoint& b) { return a.bytes < b.bytes; });
      out->push_back(*s);
    }
  }

  if (title_hint) {
    std::string coll, np, type;
    if (const JValue* c = doc.get("collective"); c && c->kind == JValue::kString) coll = c->string;
    const JValue* config = doc.get("config");
    if (const JValue* n = config ? config->get("nranks") : nullptr; n && n->kind == JValue::kNumber) {
      np = fmt("%.0f", n->number);
    }
    if (types.size() == 1) type = *types.begin();
    else if (types.size() > 1) type = "several datatypes";
    *title_hint = (coll.empty() ? "collective" : coll) + (np.empty() ? "" : ", np " + np) +
                  (type.empty() ? "" : ", " + type);
  }
  return true;
}

}  // namespace collx_bench
