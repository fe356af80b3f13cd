// libFuzzer target for reading flight-record dumps (tools/hang_report.h): `collx-info hang`
// reads every rank<R>.json it finds, so any bytes may reach parse_dump and analyze.
// Properties: no crash and no unbounded work (a size or clock reading from the file is only a
// number); a refusal says why; and the writer's JSON escaping (json_quote, as
// lib/core/flight_recorder.cc writes host and communicator names) reads back exactly: a dump
// whose host and communicator are named by the input parses to those very names.
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "lib/common/strings.h"
#include "tools/hang_report.h"

using namespace collx;

namespace {

// A one-record dump in the recorder's layout, with `text` as host and communicator name.
std::string dump_naming(const std::string& text) {
  return "{\"collx_flight_record\": 1, \"host\": " + json_quote(text) +
         ", \"pid\": 7, \"rank\": 0, \"dumped_ns\": 3000000000, \"dumped_wall_us\": 0, \"communicators\": [\n"
         "{\"name\": " + json_quote(text) + ", \"rank\": 0, \"size\": 2, \"transport\": \"tcp\", \"records\": [\n"
         "  {\"id\": 1, \"seq\": 5, \"kind\": \"allreduce\", \"count\": 8, \"datatype\": \"float32\", \"op\": \"sum\", "
         "\"root\": -1, \"peer\": -1, \"algorithm\": \"ring\", \"state\": \"running\", \"status\": \"COLLX_OK\", "
         "\"enqueue_ns\": 1000000000, \"start_ns\": 1000000000, \"end_ns\": 0, \"enqueue_wall_us\": 0}\n"
         "]}\n]}\n";
}

void check_escaping_round_trip(const std::string& text) {
  hang::RankDump dump;
  std::string error;
  if (!hang::parse_dump(dump_naming(text), &dump, &error)) std::abort();
  if (dump.host != text || dump.comms.size() != 1 || dump.comms.count(text) != 1) std::abort();
  const hang::CommDump& comm = dump.comms.at(text);
  if (comm.size != 2 || comm.records.size() != 1 || comm.records[0].seq != 5 || comm.records[0].state != "running")
    std::abort();
  // Rank 1 has no dump: the analysis names the stuck all-reduce, who is in it and who is not.
  const std::vector<std::string> lines = hang::analyze({dump});
  if (lines.size() != 1 || lines[0].find("in it: ranks 0 (waiting since 2.0 s); not in it: rank 1 (no dump)") ==
                               std::string::npos)
    std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  hang::RankDump dump;
  std::string error;
  if (hang::parse_dump(text, &dump, &error)) {
    // Two ranks' worth of the same dump, and the dump with itself renamed to rank 0 and 1.
    hang::RankDump other = dump;
    for (auto& entry : other.comms) entry.second.rank = entry.second.rank == 0 ? 1 : 0;
    for (const std::string& line : hang::analyze({dump, other}))
      if (line.empty()) std::abort();
  } else if (error.empty()) {
    std::abort();
  }
  check_escaping_round_trip(text);
  return 0;
}
