// collx-info hang DIR: reads the flight-record dumps of every rank (rank<R>.json, written by
// lib/core/flight_recorder.cc) and says, per stuck collective, which ranks are in it, which
// are not, and where each of those is.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace collx {
namespace hang {

struct Record {
  uint64_t id = 0;
  uint64_t seq = 0;
  std::string kind, datatype, op, algorithm, state, status;
  uint64_t count = 0;
  int root = -1;
  int peer = -1;
  int64_t start_ns = 0;
  int64_t end_ns = 0;
};

struct CommDump {
  int rank = 0;
  int size = 0;
  std::string transport;
  std::vector<Record> records;  // oldest first
};

struct RankDump {
  std::string file;
  std::string host;
  int pid = 0;
  int64_t dumped_ns = 0;
  std::map<std::string, CommDump> comms;  // by communicator name
};

// Parses one dump (the line-per-record layout the recorder writes). False + *error when the
// text is not a collx flight record.
bool parse_dump(const std::string& text, RankDump* out, std::string* error);

// One line per stuck collective; "no stuck collective ..." when there is none.
std::vector<std::string> analyze(const std::vector<RankDump>& dumps);

// Reads every rank*.json in `dir` and prints the analysis; the exit status of collx-info hang
// (0 done, 1 no stuck collective found, 2 no readable dump).
int report_main(const std::string& dir);

}  // namespace hang
}  // namespace collx
