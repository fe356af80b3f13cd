/* collx-mpi-bench: the Open MPI baseline for collx-bench.
 *
 * Times MPI_Allreduce, MPI_Reduce_scatter_block and MPI_Allgather over the same size sweep,
 * with the same flags (-b -e -i -f -n -w -c -d -o, --json FILE) and prints the same
 * nccl-tests-style table as collx-bench (algorithm column "mpi"), so compare_mpi.sh can
 * join the two JSON files by size. Counts, busbw factors, number formats and input
 * patterns follow bench/collx_bench/{sweep,format,data}.cc; keep them in step.
 *
 * Usage: mpirun -np N collx-mpi-bench allreduce|reducescatter|allgather [flags]
 */
#include <limits.h>
#include <math.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "collx/collx_version.h"

enum { ALLREDUCE, REDUCESCATTER, ALLGATHER };
static const char* const kCollNames[] = {"allreduce", "reducescatter", "allgather"};

typedef struct {
  const char* name; /* nccl-tests spelling, as collx-bench prints it */
  MPI_Datatype (*mpi)(void);
  size_t bytes;
  int is_signed;
} TypeInfo;

/* MPI datatypes are not compile-time constants in every MPI: fetch them through functions. */
static MPI_Datatype t_i8(void) { return MPI_INT8_T; }
static MPI_Datatype t_u8(void) { return MPI_UINT8_T; }
static MPI_Datatype t_i32(void) { return MPI_INT32_T; }
static MPI_Datatype t_u32(void) { return MPI_UINT32_T; }
static MPI_Datatype t_i64(void) { return MPI_INT64_T; }
static MPI_Datatype t_u64(void) { return MPI_UINT64_T; }
static MPI_Datatype t_f32(void) { return MPI_FLOAT; }
static MPI_Datatype t_f64(void) { return MPI_DOUBLE; }
static const TypeInfo kTypes[] = {
    {"int8", t_i8, 1, 1},   {"uint8", t_u8, 1, 0},   {"int32", t_i32, 4, 1}, {"uint32", t_u32, 4, 0},
    {"int64", t_i64, 8, 1}, {"uint64", t_u64, 8, 0}, {"float", t_f32, 4, 1}, {"double", t_f64, 8, 1},
};
enum { OP_SUM, OP_PROD, OP_MIN, OP_MAX };
static const char* const kOpNames[] = {"sum", "prod", "min", "max"};

typedef struct {
  int coll;
  unsigned long long min_bytes, max_bytes, step_bytes, step_factor;
  int iters, warmup, check, type, op;
  const char* json;
} Opts;

typedef struct {
  int measured, checked;
  double time_us, algbw, busbw;
  long long wrong;
} Cell;

static int g_rank, g_nranks;

static void usage(FILE* f) {
  fprintf(f,
          "usage: mpirun -np N collx-mpi-bench allreduce|reducescatter|allgather [options]\n"
          "  -b/--minbytes SIZE -e/--maxbytes SIZE -i/--stepbytes SIZE -f/--stepfactor N\n"
          "  -n/--iters N [20]  -w/--warmup_iters N [5]  -c/--check N [1]\n"
          "  -d/--datatype int8|uint8|int32|uint32|int64|uint64|float|double [float]\n"
          "  -o/--op sum|prod|min|max [sum]  --json FILE  -h/--help\n");
}

static int parse_size(const char* s, unsigned long long* out) {
  char* end = NULL;
  if (!s || !*s || *s < '0' || *s > '9') return 0;
  unsigned long long v = strtoull(s, &end, 10), m = 1;
  if (*end == 'K' || *end == 'k') m = 1ull << 10;
  else if (*end == 'M' || *end == 'm') m = 1ull << 20;
  else if (*end == 'G' || *end == 'g') m = 1ull << 30;
  else if (*end != '\0') return 0;
  if (m > 1 && end[1] != '\0' && strcmp(end + 1, "B") != 0 && strcmp(end + 1, "iB") != 0) return 0;
  *out = v * m;
  return 1;
}

static int parse_int(const char* s, int min, int* out) {
  char* end = NULL;
  long v = s ? strtol(s, &end, 10) : 0;
  if (!s || end == s || *end != '\0' || v < min || v > INT_MAX) return 0;
  *out = (int)v;
  return 1;
}

/* Returns 0 = run, 1 = help printed, 2 = error printed. */
static int parse_args(int argc, char** argv, Opts* o) {
  int have_coll = 0;
  for (int i = 1; i < argc; ++i) {
    const char* a = argv[i];
    const char* v = NULL;
    char name[64] = "";
    if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) { if (g_rank == 0) usage(stdout); return 1; }
    if (a[0] != '-') {
      int c;
      for (c = 0; c < 3 && strcmp(a, kCollNames[c]) != 0; ++c) {}
      if (c == 3 && strcmp(a, "reduce_scatter") == 0) c = REDUCESCATTER;
      if (c == 3 || have_coll) { if (g_rank == 0) fprintf(stderr, "collx-mpi-bench: unexpected argument '%s'\n", a); return 2; }
      o->coll = c;
      have_coll = 1;
      continue;
    }
    if (a[1] == '-') {  /* --name or --name=value */
      const char* eq = strchr(a, '=');
      size_t len = eq ? (size_t)(eq - a - 2) : strlen(a + 2);
      if (len >= sizeof(name)) len = sizeof(name) - 1;
      memcpy(name, a + 2, len);
      name[len] = '\0';
      if (eq) v = eq + 1;
    } else {
      static const char* const shorts[][2] = {{"b", "minbytes"}, {"e", "maxbytes"}, {"i", "stepbytes"},
                                              {"f", "stepfactor"}, {"n", "iters"}, {"w", "warmup_iters"},
                                              {"c", "check"}, {"d", "datatype"}, {"o", "op"}};
      for (size_t k = 0; k < sizeof(shorts) / sizeof(shorts[0]); ++k) {
        if (a[1] == shorts[k][0][0]) snprintf(name, sizeof(name), "%s", shorts[k][1]);
      }
      if (a[1] != '\0' && a[2] != '\0') v = a + 2;
    }
    if (!v) v = i + 1 < argc ? argv[++i] : NULL;
    int ok = v != NULL;
    if (!ok) {
    } else if (!strcmp(name, "minbytes")) ok = parse_size(v, &o->min_bytes);
    else if (!strcmp(name, "maxbytes")) ok = parse_size(v, &o->max_bytes);
    else if (!strcmp(name, "stepbytes")) ok = parse_size(v, &o->step_bytes);
    else if (!strcmp(name, "stepfactor")) { int f; ok = parse_int(v, 1, &f); o->step_factor = (unsigned)f; }
    else if (!strcmp(name, "iters")) ok = parse_int(v, 1, &o->iters);
    else if (!strcmp(name, "warmup_iters")) ok = parse_int(v, 0, &o->warmup);
    else if (!strcmp(name, "check")) ok = parse_int(v, 0, &o->check);
    else if (!strcmp(name, "json")) o->json = v;
    else if (!strcmp(name, "datatype")) {
      ok = 0;
      if (!strcmp(v, "float32")) v = "float";
      if (!strcmp(v, "float64")) v = "double";
      for (int t = 0; t < (int)(sizeof(kTypes) / sizeof(kTypes[0])); ++t) {
        if (!strcmp(v, kTypes[t].name)) { o->type = t; ok = 1; }
      }
      if (!ok) {
        if (g_rank == 0) fprintf(stderr, "collx-mpi-bench: datatype '%s' has no MPI equivalent here "
                                         "(int8 uint8 int32 uint32 int64 uint64 float double)\n", v);
        return 2;
      }
    } else if (!strcmp(name, "op")) {
      ok = 0;
      for (int k = 0; k < 4; ++k) {
        if (!strcmp(v, kOpNames[k])) { o->op = k; ok = 1; }
      }
      if (!ok) {
        if (g_rank == 0) fprintf(stderr, "collx-mpi-bench: op '%s' has no MPI equivalent (sum prod min max)\n", v);
        return 2;
      }
    } else {
      if (g_rank == 0) fprintf(stderr, "collx-mpi-bench: unknown option '%s'\n", a);
      return 2;
    }
    if (!ok) {
      if (g_rank == 0) fprintf(stderr, "collx-mpi-bench: bad or missing value for '%s'\n", a);
      return 2;
    }
  }
  if (!have_coll || o->min_bytes > o->max_bytes || (o->step_factor <= 1 && o->step_bytes == 0) ||
      (o->step_factor > 1 && o->min_bytes == 0)) {
    if (g_rank == 0) { fprintf(stderr, "collx-mpi-bench: no collective given or an empty size sweep\n"); usage(stderr); }
    return 2;
  }
  return 0;
}

/* --- data patterns (as bench/collx_bench/data.cc) and checking --- */

static double load(int t, const void* b, size_t i) {
  switch (t) {
    case 0: return ((const int8_t*)b)[i];
    case 1: return ((const uint8_t*)b)[i];
    case 2: return ((const int32_t*)b)[i];
    case 3: return ((const uint32_t*)b)[i];
    case 4: return (double)((const int64_t*)b)[i];
    case 5: return (double)((const uint64_t*)b)[i];
    case 6: return ((const float*)b)[i];
    default: return ((const double*)b)[i];
  }
}

static void store(int t, void* b, size_t i, double v) {
  switch (t) {
    case 0: ((int8_t*)b)[i] = (int8_t)v; break;
    case 1: ((uint8_t*)b)[i] = (uint8_t)v; break;
    case 2: ((int32_t*)b)[i] = (int32_t)v; break;
    case 3: ((uint32_t*)b)[i] = (uint32_t)v; break;
    case 4: ((int64_t*)b)[i] = (int64_t)v; break;
    case 5: ((uint64_t*)b)[i] = (uint64_t)v; break;
    case 6: ((float*)b)[i] = (float)v; break;
    default: ((double*)b)[i] = v; break;
  }
}

static double input_value(const Opts* o, int r, size_t i) {
  if (o->coll == ALLGATHER) return (double)((5 * (size_t)r + 3 * (i % 29)) % 29);
  if (o->op == OP_PROD) {
    size_t slot = (i + (size_t)r) % (size_t)g_nranks;
    return slot == 0 ? 2.0 : (slot == 1 && i % 3 == 0) ? 3.0 : 1.0;
  }
  return (double)((3 * (size_t)r + i) % 4) - (kTypes[o->type].is_signed ? 1.0 : 0.0);
}

static double reduced(const Opts* o, size_t i) {
  double acc = input_value(o, 0, i);
  for (int q = 1; q < g_nranks; ++q) {
    double v = input_value(o, q, i);
    if (o->op == OP_SUM) acc += v;
    else if (o->op == OP_PROD) acc *= v;
    else if (o->op == OP_MIN) acc = v < acc ? v : acc;
    else acc = v > acc ? v : acc;
  }
  return acc;
}

/* Fills inputs and poisons outputs (111); `buf` is the single buffer when in place. */
static void fill(const Opts* o, size_t count, void* send, void* recv, int in_place) {
  size_t n = (size_t)g_nranks, r = (size_t)g_rank;
  size_t in = o->coll == REDUCESCATTER ? count * n : count;
  size_t out = o->coll == ALLGATHER ? count * n : count;
  if (in_place) {
    for (size_t i = 0; i < (in > out ? in : out); ++i) store(o->type, recv, i, 111.0);
    size_t base = o->coll == ALLGATHER ? r * count : 0;
    for (size_t i = 0; i < in; ++i) store(o->type, recv, base + i, input_value(o, g_rank, i));
    return;
  }
  for (size_t i = 0; i < in; ++i) store(o->type, send, i, input_value(o, g_rank, i));
  for (size_t i = 0; i < out; ++i) store(o->type, recv, i, 111.0);
}

/* MPI's in-place reduce-scatter leaves the rank's block at the start of the buffer. */
static long long count_wrong(const Opts* o, size_t count, const void* recv) {
  long long wrong = 0;
  size_t n = (size_t)g_nranks, c = count ? count : 1;
  size_t out = o->coll == ALLGATHER ? count * n : count;
  for (size_t i = 0; i < out; ++i) {
    double e = o->coll == ALLREDUCE ? reduced(o, i)
             : o->coll == REDUCESCATTER ? reduced(o, (size_t)g_rank * count + i)
             : input_value(o, (int)(i / c), i % c);
    if (load(o->type, recv, i) != e) ++wrong;
  }
  return wrong;
}

static int run_call(const Opts* o, int count, void* send, void* recv, int in_place) {
  MPI_Datatype t = kTypes[o->type].mpi();
  MPI_Op op = o->op == OP_SUM ? MPI_SUM : o->op == OP_PROD ? MPI_PROD : o->op == OP_MIN ? MPI_MIN : MPI_MAX;
  const void* s = in_place ? MPI_IN_PLACE : send;
  switch (o->coll) {
    case ALLREDUCE: return MPI_Allreduce(s, recv, count, t, op, MPI_COMM_WORLD);
    case REDUCESCATTER: return MPI_Reduce_scatter_block(s, recv, count, t, op, MPI_COMM_WORLD);
    default:
      return in_place ? MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, recv, count, t, MPI_COMM_WORLD)
                      : MPI_Allgather(send, count, t, recv, count, t, MPI_COMM_WORLD);
  }
}

static void measure(const Opts* o, size_t count, void* send, void* recv, int in_place, Cell* cell) {
  fill(o, count, send, recv, in_place);
  for (int i = 0; i < o->warmup; ++i) run_call(o, (int)count, send, recv, in_place);
  MPI_Barrier(MPI_COMM_WORLD);
  double t0 = MPI_Wtime();
  for (int i = 0; i < o->iters; ++i) run_call(o, (int)count, send, recv, in_place);
  cell->time_us = (MPI_Wtime() - t0) * 1e6 / o->iters;
  cell->measured = 1;
  cell->checked = o->check > 0;
  cell->wrong = 0;
  for (int c = 0; c < o->check; ++c) {
    fill(o, count, send, recv, in_place);
    run_call(o, (int)count, send, recv, in_place);
    cell->wrong += count_wrong(o, count, recv);
  }
}

/* --- output (format strings of bench/collx_bench/format.cc, i.e. nccl-tests') --- */

static void float_str(double v, int width, char* out, size_t cap) {
  int power = 0;
  for (uint64_t val = 1; v >= (double)val && power < 20; val *= 10) power++;
  if (power < width - 2) snprintf(out, cap, "%*.2f", width, v);
  else if (power < width - 1) snprintf(out, cap, "%*.1f", width, v);
  else if (power < width + 1) snprintf(out, cap, "%*.0f", width, v);
  else if (width >= 7) snprintf(out, cap, "%*.1e", width, v);
  else snprintf(out, cap, "%*.0e", width, v);
}

static void print_cell(const Cell* c) {
  char t[32], a[32], b[32];
  float_str(c->time_us, 7, t, sizeof(t));
  float_str(c->algbw, 6, a, sizeof(a));
  float_str(c->busbw, 6, b, sizeof(b));
  if (c->checked) printf("  %7s  %6s  %6s  %6g", t, a, b, (double)c->wrong);
  else printf("  %7s  %6s  %6s    N/A", t, a, b);
}

static void json_cell(FILE* f, const Cell* c) {
  fprintf(f, "{\"time_us\": %.9g, \"algbw\": %.9g, \"busbw\": %.9g, \"wrong\": ", c->time_us, c->algbw, c->busbw);
  if (c->checked) fprintf(f, "%lld}", c->wrong);
  else fprintf(f, "null}");
}

static void json_string(FILE* f, const char* s) {
  fputc('"', f);
  for (; *s; ++s) {
    if (*s == '"' || *s == '\\') fprintf(f, "\\%c", *s);
    else if ((unsigned char)*s < 0x20) fprintf(f, "\\u%04x", (unsigned char)*s);
    else fputc(*s, f);
  }
  fputc('"', f);
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &g_nranks);
  Opts o = {ALLREDUCE, 32ull << 20, 32ull << 20, 1ull << 20, 1, 20, 5, 1, 6, OP_SUM, NULL};
  int pr = parse_args(argc, argv, &o);
  if (pr != 0) {
    MPI_Finalize();
    return pr == 1 ? 0 : 2;
  }
  const size_t elt = kTypes[o.type].bytes, n = (size_t)g_nranks;
  const double factor = o.coll == ALLREDUCE ? 2.0 * (double)(n - 1) / (double)n : (double)(n - 1) / (double)n;

  /* Rank list: pid, local rank, host. */
  MPI_Comm node;
  int local_rank = 0;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, g_rank, MPI_INFO_NULL, &node);
  MPI_Comm_rank(node, &local_rank);
  MPI_Comm_free(&node);
  struct { int pid, local_rank; char host[256]; } me, *all = malloc(n * sizeof(me));
  memset(&me, 0, sizeof(me));
  me.pid = (int)getpid();
  me.local_rank = local_rank;
  gethostname(me.host, sizeof(me.host) - 1);
  MPI_Gather(&me, (int)sizeof(me), MPI_BYTE, all, (int)sizeof(me), MPI_BYTE, 0, MPI_COMM_WORLD);

  char libver[MPI_MAX_LIBRARY_VERSION_STRING] = "";
  int len = 0;
  MPI_Get_library_version(libver, &len);
  char* nl = strchr(libver, '\n');
  if (nl) *nl = '\0';
  char* comma = strchr(libver, ',');
  if (comma) *comma = '\0';  /* "Open MPI v4.1.4" */

  FILE* jf = NULL;
  if (g_rank == 0) {
    if (o.json) printf("# Writing JSON output to %s\n", o.json);
    printf("# collx-mpi-bench version %s mpi-library=%s\n", COLLX_VERSION_STRING, libver);
    printf("# Collective test starting: %s\n", kCollNames[o.coll]);
    printf("# np %d minBytes %llu maxBytes %llu step: %llu(%s) warmup iters: %d iters: %d validation: %d "
           "transport: mpi algorithm: mpi\n#\n# Using ranks\n",
           g_nranks, o.min_bytes, o.max_bytes, o.step_factor > 1 ? o.step_factor : o.step_bytes,
           o.step_factor > 1 ? "factor" : "bytes", o.warmup, o.iters, o.check);
    for (size_t r = 0; r < n; ++r)
      printf("#  Rank %2d Group  0 Pid %6d on %10s local rank %2d\n", (int)r, all[r].pid, all[r].host, all[r].local_rank);
    printf("#\n# %10s  %12s  %8s  %6s  %6s           out-of-place                       in-place          \n", "", "", "", "", "");
    printf("# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s  %s\n", "size", "count", "type",
           "redop", "root", "time", "algbw", "busbw", "#wrong", "time", "algbw", "busbw", "#wrong", "algorithm");
    printf("# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s \n", "(B)", "(elements)", "", "", "",
           "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)", "(GB/s)", "");
    fflush(stdout);
    if (o.json && !(jf = fopen(o.json, "w"))) fprintf(stderr, "collx-mpi-bench: cannot write %s\n", o.json);
    if (jf) {
      fprintf(jf, "{\"tool\": \"collx-mpi-bench\", \"version\": \"%s\", \"library_version\": ", COLLX_VERSION_STRING);
      json_string(jf, libver);
      fprintf(jf, ", \"collective\": \"%s\", \"config\": {\"collective\": \"%s\", \"nranks\": %d, "
              "\"minimum_bytes\": %llu, \"maximum_bytes\": %llu, \"%s\": %llu, \"warmup_iters\": %d, "
              "\"iterations\": %d, \"validation\": %d, \"datatypes\": [\"%s\"], \"ops\": [\"%s\"], "
              "\"root\": -1, \"transport\": \"mpi\", \"algorithm\": \"mpi\"}, \"ranks\": [",
              kCollNames[o.coll], kCollNames[o.coll], g_nranks, o.min_bytes, o.max_bytes,
              o.step_factor > 1 ? "step_factor" : "step_bytes", o.step_factor > 1 ? o.step_factor : o.step_bytes,
              o.warmup, o.iters, o.check, kTypes[o.type].name, o.coll == ALLGATHER ? "none" : kOpNames[o.op]);
      for (size_t r = 0; r < n; ++r) {
        fprintf(jf, "%s{\"rank\": %d, \"pid\": %d, \"host\": ", r ? ", " : "", (int)r, all[r].pid);
        json_string(jf, all[r].host);
        fprintf(jf, ", \"local_rank\": %d}", all[r].local_rank);
      }
      fprintf(jf, "], \"results\": [");
    }
  }
  free(all);

  /* Buffers for the largest size; both sides hold the whole array for in-place forms. */
  size_t cap = (size_t)o.max_bytes + 4096;
  char* send = malloc(cap);
  char* recv = malloc(cap);
  if (!send || !recv) {
    fprintf(stderr, "collx-mpi-bench: rank %d: cannot allocate %zu bytes\n", g_rank, cap);
    MPI_Abort(MPI_COMM_WORLD, 3);
  }
  memset(send, 0, cap);
  memset(recv, 0, cap);
  long long wrong_total = 0;
  double bw_sum = 0;
  int bw_n = 0, rows = 0;
  for (unsigned long long size = o.min_bytes; size <= o.max_bytes;) {
    size_t count = (size_t)(size / elt), per = (count / n) / (16 / elt) * (16 / elt);
    if (o.coll != ALLREDUCE) count = per;
    size_t bytes = (o.coll == ALLREDUCE ? count : count * n) * elt;
    if (count > INT_MAX) {
      if (g_rank == 0) fprintf(stderr, "collx-mpi-bench: count %zu exceeds MPI's int counts\n", count);
      MPI_Abort(MPI_COMM_WORLD, 2);
    }
    Cell cells[2];
    memset(cells, 0, sizeof(cells));
    measure(&o, count, send, recv, 0, &cells[0]);
    measure(&o, count, send, recv, 1, &cells[1]);
    double totals[4] = {cells[0].time_us, cells[1].time_us, (double)cells[0].wrong, (double)cells[1].wrong};
    MPI_Allreduce(MPI_IN_PLACE, totals, 4, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    for (int k = 0; k < 2; ++k) {
      cells[k].time_us = totals[k] / (double)n;
      cells[k].wrong = (long long)totals[2 + k];
      cells[k].algbw = cells[k].time_us > 0 ? (double)bytes / 1e9 / (cells[k].time_us * 1e-6) : 0;
      cells[k].busbw = cells[k].algbw * factor;
      if (cells[k].checked) wrong_total += cells[k].wrong;
      bw_sum += cells[k].busbw;
      bw_n++;
    }
    if (g_rank == 0) {
      printf("%12zu  %12zu  %8s  %6s  %6i", bytes, count, kTypes[o.type].name,
             o.coll == ALLGATHER ? "none" : kOpNames[o.op], -1);
      print_cell(&cells[0]);
      print_cell(&cells[1]);
      printf("  mpi\n");
      fflush(stdout);
      if (jf) {
        fprintf(jf, "%s{\"size\": %zu, \"count\": %zu, \"type\": \"%s\", \"redop\": \"%s\", \"root\": -1, "
                "\"algorithm\": \"mpi\", \"out_of_place\": ", rows ? ", " : "", bytes, count, kTypes[o.type].name,
                o.coll == ALLGATHER ? "none" : kOpNames[o.op]);
        json_cell(jf, &cells[0]);
        fprintf(jf, ", \"in_place\": ");
        json_cell(jf, &cells[1]);
        fprintf(jf, "}");
      }
    }
    rows++;
    if (o.step_factor > 1) {
      if (size > o.max_bytes / o.step_factor) break;
      size *= o.step_factor;
    } else {
      if (size > o.max_bytes - o.step_bytes) break;
      size += o.step_bytes;
    }
  }
  double avg = bw_n ? bw_sum / bw_n : 0;
  if (g_rank == 0) {
    printf("# %-20s : %lld %s\n", "Out of bounds values", wrong_total, wrong_total ? "FAILED" : "OK");
    printf("# %-20s : %g \n#\n# Collective test concluded: %s\n", "Avg bus bandwidth", avg, kCollNames[o.coll]);
    if (jf) {
      fprintf(jf, "], \"wrong_total\": %lld, \"avg_busbw\": %.9g, \"errors\": []}\n", wrong_total, avg);
      fclose(jf);
    }
  }
  free(send);
  free(recv);
  MPI_Finalize();
  return wrong_total ? 1 : 0;
}
