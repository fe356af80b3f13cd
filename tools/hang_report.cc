// Reading flight-record dumps and naming the stuck collectives (tools/hang_report.h).
#include "tools/hang_report.h"

#include <dirent.h>

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <set>
#include <sstream>

namespace collx {
namespace hang {

namespace {

// The 4 hex digits at line[at...] as a number; false when there are not 4 of them.
bool hex4(const std::string& line, size_t at, unsigned* out) {
  if (at + 4 > line.size()) return false;
  unsigned value = 0;
  for (size_t i = at; i < at + 4; ++i) {
    const char c = line[i];
    if (!std::isxdigit(static_cast<unsigned char>(c))) return false;
    value = value * 16 + static_cast<unsigned>(std::isdigit(static_cast<unsigned char>(c)) ? c - '0' : (c | 0x20) - 'a' + 10);
  }
  *out = value;
  return true;
}

// The value of `"key": ` on one line of our own dump format: a string (unescaped, the
// \u00XX escapes of json_quote included) or a number token. Empty when the key is absent.
std::string field(const std::string& line, const std::string& key) {
  const std::string needle = "\"" + key + "\": ";
  const size_t at = line.find(needle);
  if (at == std::string::npos) return "";
  size_t i = at + needle.size();
  std::string out;
  if (i < line.size() && line[i] == '"') {
    for (++i; i < line.size() && line[i] != '"'; ++i) {
      if (line[i] == '\\' && i + 1 < line.size()) {
        ++i;
        unsigned code = 0;
        if (line[i] == 'u' && hex4(line, i + 1, &code)) {
          out += code <= 0xff ? static_cast<char>(code) : '?';  // the recorder escapes bytes only
          i += 4;
          continue;
        }
      }
      out += line[i];
    }
    return out;
  }
  while (i < line.size() && line[i] != ',' && line[i] != '}' && line[i] != ' ') out += line[i++];
  return out;
}

int64_t number(const std::string& line, const std::string& key) {
  return std::strtoll(field(line, key).c_str(), nullptr, 10);
}

// A started record: the rank entered the operation (it may have failed in it since).
bool entered(const Record& r) { return r.state == "running" || r.state == "failed" || r.state == "completed"; }

std::string describe(const Record& r) {
  std::string text = r.kind;
  if (r.seq != 0) text += " #" + std::to_string(r.seq);
  if (r.kind == "send" || r.kind == "recv") {
    text += (r.kind == "send" ? " to " : " from ") + std::to_string(r.peer);
  }
  return text;
}

// later - earlier, saturated: the clock readings come from files, so any value is possible.
int64_t elapsed_ns(int64_t later, int64_t earlier) {
  int64_t difference = 0;
  if (!__builtin_sub_overflow(later, earlier, &difference)) return difference;
  return later > earlier ? INT64_MAX : INT64_MIN;
}

std::string seconds(int64_t ns) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f s", static_cast<double>(ns) / 1e9);
  return buf;
}

// Where a rank that is not in the stuck collective is: its last completed collective and
// what it runs now.
std::string whereabouts(const RankDump& dump, const CommDump& comm) {
  const Record* last_done = nullptr;
  const Record* current = nullptr;
  for (const Record& r : comm.records) {
    if (r.seq != 0 && r.state == "completed") last_done = &r;
    if (r.state == "running" || r.state == "posted") current = &r;
  }
  std::string text = last_done ? "last completed " + describe(*last_done) : "no collective completed";
  if (!current) return text + ", now idle";
  text += current->state == "posted" ? ", queued " : ", now in ";
  text += describe(*current);
  if (current->state == "running") text += " for " + seconds(elapsed_ns(dump.dumped_ns, current->start_ns));
  return text;
}

std::string join_ranks(const std::vector<int>& ranks) {
  std::string out;
  for (size_t i = 0; i < ranks.size(); ++i) out += (i ? "," : "") + std::to_string(ranks[i]);
  return out;
}

}  // namespace

bool parse_dump(const std::string& text, RankDump* out, std::string* error) {
  std::istringstream in(text);
  std::string line;
  if (!std::getline(in, line) || field(line, "collx_flight_record").empty()) {
    *error = "not a collx flight record (no \"collx_flight_record\" header)";
    return false;
  }
  out->host = field(line, "host");
  out->pid = static_cast<int>(number(line, "pid"));
  out->dumped_ns = number(line, "dumped_ns");
  CommDump* comm = nullptr;
  while (std::getline(in, line)) {
    if (line.rfind("{\"name\": ", 0) == 0) {
      comm = &out->comms[field(line, "name")];
      comm->rank = static_cast<int>(number(line, "rank"));
      comm->size = static_cast<int>(number(line, "size"));
      comm->transport = field(line, "transport");
    } else if (line.rfind("  {\"id\": ", 0) == 0 && comm) {
      Record r;
      r.id = static_cast<uint64_t>(number(line, "id"));
      r.seq = static_cast<uint64_t>(number(line, "seq"));
      r.kind = field(line, "kind");
      r.count = static_cast<uint64_t>(number(line, "count"));
      r.datatype = field(line, "datatype");
      r.op = field(line, "op");
      r.root = static_cast<int>(number(line, "root"));
      r.peer = static_cast<int>(number(line, "peer"));
      r.algorithm = field(line, "algorithm");
      r.state = field(line, "state");
      r.status = field(line, "status");
      r.start_ns = number(line, "start_ns");
      r.end_ns = number(line, "end_ns");
      comm->records.push_back(r);
    }
  }
  return true;
}

std::vector<std::string> analyze(const std::vector<RankDump>& dumps) {
  std::vector<std::string> lines;
  std::set<std::string> names;
  for (const RankDump& d : dumps) {
    for (const auto& c : d.comms) names.insert(c.first);
  }
  for (const std::string& name : names) {
    // Per rank of this communicator: its dump (null when missing).
    int size = 0;
    std::map<int, const RankDump*> by_rank;
    for (const RankDump& d : dumps) {
      auto it = d.comms.find(name);
      if (it == d.comms.end()) continue;
      by_rank[it->second.rank] = &d;
      size = std::max(size, it->second.size);
    }
    // Stuck: a collective some rank is still running, or that timed out there.
    std::set<uint64_t> stuck;
    for (const auto& rd : by_rank) {
      for (const Record& r : rd.second->comms.at(name).records) {
        if (r.seq != 0 && (r.state == "running" || r.status == "COLLX_ERR_TIMEOUT")) stuck.insert(r.seq);
      }
    }
    for (const uint64_t seq : stuck) {
      std::vector<int> in_it;
      std::vector<std::string> not_in_it;
      const Record* sample = nullptr;
      int64_t waited = 0;
      // Ranks without a dump are named in ranges: the size comes from a file, so it may be
      // far larger than the number of dumps.
      int next = 0;
      auto no_dump = [&not_in_it](int from, int to) {
        if (from >= to) return;
        not_in_it.push_back(from + 1 == to ? "rank " + std::to_string(from) + " (no dump)"
                                           : "ranks " + std::to_string(from) + "-" + std::to_string(to - 1) + " (no dump)");
      };
      for (const auto& [rank, dump_of_rank] : by_rank) {
        if (rank < 0 || rank >= size) continue;
        no_dump(next, rank);
        next = rank + 1;
        const RankDump& dump = *dump_of_rank;
        const CommDump& comm = dump.comms.at(name);
        const Record* mine = nullptr;
        for (const Record& r : comm.records) {
          if (r.seq == seq) mine = &r;
        }
        if (mine && entered(*mine) && mine->state != "completed") {
          in_it.push_back(rank);
          sample = mine;
          const int64_t until = mine->state == "running" ? dump.dumped_ns : mine->end_ns;
          waited = std::max(waited, elapsed_ns(until, mine->start_ns));
        } else if (mine && mine->state == "completed") {
          not_in_it.push_back("rank " + std::to_string(rank) + " (completed it)");
        } else {
          not_in_it.push_back("rank " + std::to_string(rank) + " (" + whereabouts(dump, comm) + ")");
        }
      }
      no_dump(next, size);
      if (!sample) continue;
      std::string line = sample->kind + " #" + std::to_string(seq) + " (count " + std::to_string(sample->count);
      if (sample->kind != "barrier") line += ", " + sample->datatype;
      line += ", " + sample->algorithm + ") on '" + name + "': in it: ranks " + join_ranks(in_it) +
              " (waiting since " + seconds(waited) + ")";
      if (!not_in_it.empty()) {
        line += "; not in it: ";
        for (size_t i = 0; i < not_in_it.size(); ++i) line += (i ? ", " : "") + not_in_it[i];
      }
      lines.push_back(line);
    }
  }
  return lines;
}

int report_main(const std::string& dir) {
  DIR* d = opendir(dir.c_str());
  if (!d) {
    std::fprintf(stderr, "collx-info hang: cannot open directory '%s'\n", dir.c_str());
    return 2;
  }
  std::vector<std::string> files;
  while (dirent* e = readdir(d)) {
    const std::string n = e->d_name;
    if (n.rfind("rank", 0) == 0 && n.size() > 9 && n.compare(n.size() - 5, 5, ".json") == 0) files.push_back(n);
  }
  closedir(d);
  std::sort(files.begin(), files.end());
  std::vector<RankDump> dumps;
  for (const std::string& n : files) {
    std::ifstream in(dir + "/" + n);
    std::stringstream text;
    text << in.rdbuf();
    RankDump dump;
    std::string error;
    if (!parse_dump(text.str(), &dump, &error)) {
      std::fprintf(stderr, "collx-info hang: skipping %s/%s: %s\n", dir.c_str(), n.c_str(), error.c_str());
      continue;
    }
    dump.file = n;
    dumps.push_back(std::move(dump));
  }
  if (dumps.empty()) {
    std::fprintf(stderr, "collx-info hang: no flight record (rank<R>.json) in '%s'\n", dir.c_str());
    return 2;
  }
  const std::vector<std::string> lines = analyze(dumps);
  if (lines.empty()) {
    std::printf("no stuck collective in %zu dump(s) of '%s'\n", dumps.size(), dir.c_str());
    return 1;
  }
  for (const std::string& line : lines) std::printf("%s\n", line.c_str());
  return 0;
}

}  // namespace hang
}  // namespace collx
