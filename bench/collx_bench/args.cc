#include "bench/collx_bench/args.h"

#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>

namespace collx_bench {

namespace {

// One flag: its short and long spellings and whether it takes a value.
struct Flag {
  char short_name;  // 0 = long only
  const char* long_name;
  bool takes_value;
};

const Flag kFlags[] = {
    {'b', "minbytes", true},   {'e', "maxbytes", true},  {'i', "stepbytes", true},
    {'f', "stepfactor", true}, {'n', "iters", true},     {'w', "warmup_iters", true},
    {'c', "check", true},      {'d', "datatype", true},  {'o', "op", true},
    {'r', "root", true},       {'t', "transport", true}, {'a', "algorithm", true},
    {0, "np", true},           {0, "json", true},        {'T', "timeout", true},
    {0, "plot", true},         {0, "plot-add", true},    {0, "plot-only", false},
    {0, "explain", false},     {0, "tune", true},        {'h', "help", false},
    {0, "zero-copy", false},
};

const Flag* find_short(char c) {
  for (const Flag& f : kFlags) {
    if (f.short_name == c) return &f;
  }
  return nullptr;
}

const Flag* find_long(const std::string& name) {
  for (const Flag& f : kFlags) {
    if (name == f.long_name) return &f;
  }
  // nccl-tests spells it --warmup_iters; accept --warmup-iters too.
  if (name == "warmup-iters" || name == "warmup") return find_long("warmup_iters");
  return nullptr;
}

bool parse_int(const std::string& text, long long min, long long max, long long* out) {
  if (text.empty()) return false;
  errno = 0;
  char* end = nullptr;
  const long long v = std::strtoll(text.c_str(), &end, 10);
  if (errno != 0 || end == text.c_str() || *end != '\0' || v < min || v > max) return false;
  *out = v;
  return true;
}

std::string flag_label(const Flag& f) {
  std::string s;
  if (f.short_name) s = std::string("-") + f.short_name + "/";
  return s + "--" + f.long_name;
}

// Applies one flag's value; false with *error naming the flag and the bad value.
bool apply(const Flag& f, const std::string& value, Options* o, std::string* error) {
  const std::string name = f.long_name;
  auto bad = [&](const std::string& why) {
    *error = "invalid value '" + value + "' for " + flag_label(f) + ": " + why;
    return false;
  };
  long long n = 0;
  if (name == "minbytes" || name == "maxbytes" || name == "stepbytes") {
    uint64_t bytes = 0;
    if (!parse_size(value, &bytes)) return bad("expected a size such as 8, 64K, 1M or 2G");
    (name == "minbytes" ? o->min_bytes : name == "maxbytes" ? o->max_bytes : o->step_bytes) = bytes;
  } else if (name == "stepfactor") {
    if (!parse_int(value, 1, 1 << 20, &n)) return bad("expected an integer >= 1");
    o->step_factor = static_cast<uint64_t>(n);
  } else if (name == "iters") {
    if (!parse_int(value, 1, 1 << 30, &n)) return bad("expected an integer >= 1");
    o->iters = static_cast<int>(n);
  } else if (name == "warmup_iters") {
    if (!parse_int(value, 0, 1 << 30, &n)) return bad("expected an integer >= 0");
    o->warmup_iters = static_cast<int>(n);
  } else if (name == "check") {
    if (!parse_int(value, 0, 1 << 20, &n)) return bad("expected an integer >= 0");
    o->check_iters = static_cast<int>(n);
  } else if (name == "datatype") {
    collx_datatype_t t;
    if (normalize_name(value) == "all") {
      o->datatypes.clear();
      for (int i = 0; i < COLLX_NUM_DATATYPES; ++i) o->datatypes.push_back(static_cast<collx_datatype_t>(i));
    } else if (datatype_from_name(value, &t)) {
      o->datatypes.assign(1, t);
    } else {
      return bad("expected int8, uint8, int32, uint32, int64, uint64, half, bfloat16, float, double "
                 "(or collx names float16, float32, float64) or all");
    }
  } else if (name == "op") {
    collx_op_t op;
    if (normalize_name(value) == "all") {
      o->ops.clear();
      for (int i = 0; i < COLLX_NUM_OPS; ++i) o->ops.push_back(static_cast<collx_op_t>(i));
    } else if (op_from_name(value, &op)) {
      o->ops.assign(1, op);
    } else {
      return bad("expected sum, prod, min, max, avg, premulsum (mulsum) or all");
    }
  } else if (name == "root") {
    if (normalize_name(value) == "all") {
      o->all_roots = true;
    } else if (parse_int(value, 0, 1 << 30, &n)) {
      o->root = static_cast<int>(n);
      o->all_roots = false;
    } else {
      return bad("expected a rank >= 0 or all");
    }
  } else if (name == "transport") {
    unsigned mask = 0;
    if (!transport_from_name(value, &mask)) return bad("expected auto, tcp, shm, ucx or nccl");
    o->transport = normalize_name(value);
    o->transport_mask = mask;
  } else if (name == "algorithm") {
    // Checked against the library (collx_algorithm_from_name) before ranks start.
    if (value.empty()) return bad("expected an algorithm name");
    o->algorithm = value;
  } else if (name == "np") {
    if (!parse_int(value, 1, 4096, &n)) return bad("expected a rank count between 1 and 4096");
    o->np = static_cast<int>(n);
  } else if (name == "json") {
    if (value.empty()) return bad("expected a file name");
    o->json_path = value;
  } else if (name == "plot") {
    if (value.empty()) return bad("expected an .svg file name");
    o->plot_path = value;
  } else if (name == "plot-add") {
    if (value.empty()) return bad("expected a .json file written by --json");
    o->plot_add.push_back(value);
  } else if (name == "plot-only") {
    o->plot_only = true;
  } else if (name == "explain") {
    o->explain = true;
  } else if (name == "zero-copy") {
    o->zero_copy = true;
  } else if (name == "tune") {
    if (value.empty()) return bad("needs a file name");
    o->tune_path = value;
  } else if (name == "timeout") {
    errno = 0;
    char* end = nullptr;
    const double t = std::strtod(value.c_str(), &end);
    if (errno != 0 || end == value.c_str() || *end != '\0' || !(t >= 0) || t > 1e7) {
      return bad("expected seconds >= 0 (0 = the library default)");
    }
    o->timeout_s = t;
  }
  return true;
}

}  // namespace

bool parse_size(const std::string& text, uint64_t* bytes) {
  size_t i = 0;
  uint64_t value = 0;
  while (i < text.size() && std::isdigit(static_cast<unsigned char>(text[i]))) {
    const uint64_t digit = static_cast<uint64_t>(text[i] - '0');
    if (value > (UINT64_MAX - digit) / 10) return false;
    value = value * 10 + digit;
    ++i;
  }
  if (i == 0) return false;
  std::string unit;
  for (; i < text.size(); ++i) unit += static_cast<char>(std::tolower(static_cast<unsigned char>(text[i])));
  uint64_t mult = 1;
  if (unit.empty() || unit == "b") mult = 1;
  else if (unit == "k" || unit == "kb" || unit == "kib") mult = 1ull << 10;
  else if (unit == "m" || unit == "mb" || unit == "mib") mult = 1ull << 20;
  else if (unit == "g" || unit == "gb" || unit == "gib") mult = 1ull << 30;
  else if (unit == "t" || unit == "tb" || unit == "tib") mult = 1ull << 40;
  else return false;
  if (value > UINT64_MAX / mult) return false;
  *bytes = value * mult;
  return true;
}

ParseResult parse_args(int argc, const char* const* argv, Options* options, std::string* error) {
  Options o;
  bool have_coll = false;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const Flag* flag = nullptr;
    std::string value;
    bool have_value = false;
    if (arg.size() > 2 && arg.compare(0, 2, "--") == 0) {
      std::string name = arg.substr(2);
      const size_t eq = name.find('=');
      if (eq != std::string::npos) {
        value = name.substr(eq + 1);
        name.resize(eq);
        have_value = true;
      }
      flag = find_long(name);
      if (!flag) {
        *error = "unknown option '" + arg + "'";
        return ParseResult::kError;
      }
    } else if (arg.size() >= 2 && arg[0] == '-' && !std::isdigit(static_cast<unsigned char>(arg[1]))) {
      flag = find_short(arg[1]);
      if (!flag) {
        *error = "unknown option '" + arg + "'";
        return ParseResult::kError;
      }
      if (arg.size() > 2) {
        value = arg.substr(2);
        have_value = true;
      }
    } else {
      if (have_coll) {
        *error = "unexpected argument '" + arg + "' (the collective is already '" +
                 bench_coll_name(o.coll) + "')";
        return ParseResult::kError;
      }
      if (!bench_coll_from_name(arg, &o.coll)) {
        *error = "unknown collective '" + arg +
                 "': expected allreduce, reducescatter, allgather, broadcast, reduce, alltoall, gather, "
                 "scatter, allgatherv, alltoallv, reducescatterv, gatherv, scatterv or sendrecv";
        return ParseResult::kError;
      }
      have_coll = true;
      continue;
    }
    if (!flag->takes_value) {
      if (have_value) {
        *error = "option " + flag_label(*flag) + " takes no value";
        return ParseResult::kError;
      }
      if (std::strcmp(flag->long_name, "help") == 0) return ParseResult::kHelp;
      if (!apply(*flag, "", &o, error)) return ParseResult::kError;
      continue;
    }
    if (!have_value) {
      if (i + 1 >= argc) {
        *error = "option " + flag_label(*flag) + " needs a value";
        return ParseResult::kError;
      }
      value = argv[++i];
    }
    if (!apply(*flag, value, &o, error)) return ParseResult::kError;
  }
  if ((o.plot_only || !o.plot_add.empty()) && o.plot_path.empty()) {
    *error = std::string(o.plot_only ? "--plot-only" : "--plot-add") + " needs --plot FILE.svg";
    return ParseResult::kError;
  }
  if (o.plot_only && o.plot_add.empty()) {
    *error = "--plot-only needs at least one --plot-add FILE.json to draw";
    return ParseResult::kError;
  }
  if (o.plot_only) {
    *options = o;  // no run: the collective and sizes do not matter
    return ParseResult::kOk;
  }
  if (!have_coll) {
    *error = "no collective given: expected allreduce, reducescatter, allgather, broadcast, reduce, "
             "alltoall, gather, scatter, allgatherv, alltoallv, reducescatterv, gatherv, scatterv or "
             "sendrecv";
    return ParseResult::kError;
  }
  if (o.min_bytes > o.max_bytes) {
    *error = "minbytes (" + std::to_string(o.min_bytes) + ") is larger than maxbytes (" +
             std::to_string(o.max_bytes) + ")";
    return ParseResult::kError;
  }
  *options = o;
  return ParseResult::kOk;
}

std::string usage_text(const char* program) {
  std::string p = program ? program : "collx-bench";
  return "usage: " + p + " <collective> [options]\n"
         "  collective: allreduce | reducescatter | allgather | broadcast | reduce | alltoall |\n"
         "              gather | scatter | allgatherv | alltoallv | reducescatterv | gatherv |\n"
         "              scatterv | sendrecv\n"
         "\n"
         "  -b, --minbytes SIZE      smallest size (total buffer bytes; K/M/G = powers of 1024) [32M]\n"
         "  -e, --maxbytes SIZE      largest size [32M]\n"
         "  -i, --stepbytes SIZE     additive step, when no step factor [1M]\n"
         "  -f, --stepfactor N       multiplicative step [1 = off]\n"
         "  -n, --iters N            timed iterations per size [20]\n"
         "  -w, --warmup_iters N     warm-up iterations per size [5]\n"
         "  -c, --check N            checked iterations per size; 0 = no check [1]\n"
         "  -d, --datatype TYPE      int8 uint8 int32 uint32 int64 uint64 half bfloat16 float double,\n"
         "                           collx names (float16 float32 float64 ...) or all [float]\n"
         "  -o, --op OP              sum prod min max avg premulsum (mulsum) or all [sum]\n"
         "  -r, --root RANK          root of broadcast and reduce, or all [0]\n"
         "  -t, --transport NAME     auto (shm on one host, else tcp), tcp, shm, ucx, nccl [auto]\n"
         "  -a, --algorithm NAME     auto or a collx algorithm (ring, recursive_doubling, ...) [auto]\n"
         "      --np N               local ranks to start when not under a launcher [4]\n"
         "      --json FILE          also write the results as JSON\n"
         "      --plot FILE.svg      also draw busbw against size (out of place, in place) as SVG\n"
         "      --plot-add FILE.json add an earlier --json output of collx-bench or collx-mpi-bench\n"
         "                           to the plot (repeatable; labelled by its \"label\" field or file name)\n"
         "      --plot-only          draw the --plot-add files without running a benchmark\n"
         "      --explain            print the algorithm the library picks for each size, every\n"
         "                           candidate's predicted time and why; runs nothing\n"
         "      --tune FILE          measure the transport's cost-model constants (latency, bandwidth,\n"
         "                           reduction speed) and write them to FILE for COLLX_TUNE_FILE\n"
         "  -T, --timeout SECONDS    deadline of every collx call; 0 = library default [0]\n"
         "      --zero-copy          buffers from collx_mem_alloc (peers on the host read them in place)\n"
         "  -h, --help               this text\n"
         "\n"
         "Without a launcher environment (COLLX_RANK, RANK, OMPI_COMM_WORLD_RANK, PMI_RANK or\n"
         "SLURM_PROCID with SLURM_NTASKS > 1), starts --np local ranks that meet through a TCP store on\n"
         "127.0.0.1, each pinned to a core (COLLX_BIND=core, as mpirun binds) when there are as many\n"
         "CPUs as ranks; COLLX_BIND=none keeps them unpinned. Under mpirun or srun, set\n"
         "COLLX_STORE_ADDR=<host of rank 0>:<port> for every rank.\n"
         "Exit status: 0 = success, 1 = wrong results, 2 = bad command line, 3 = a collx call failed,\n"
         "128+N = a rank was killed by signal N.\n"
         "\n"
         "collx-bench soak [--np N] [--ops N] [--cycles N] [--count N] [--rss-threshold-kib K]\n"
         "                 [--fd-threshold N]: N small all-reduces, then N communicator dup/split +\n"
         "                 destroy cycles; RSS and open fds before/after; exit 1 when they grow.\n"
         "collx-bench dp|zero [--np N] [--elems N] [--tensors N] [--buckets N] [--iters N] ...:\n"
         "                 a simulated backward pass with gradient buckets (dp: overlap efficiency)\n"
         "                 or ZeRO stages 1-3 (zero: per-rank memory); collx-bench dp -h for all flags.\n";
}

}  // namespace collx_bench
