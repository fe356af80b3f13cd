// collx-example-mlp: trains a small MLP with DP, ZeRO-1/2/3, TP (+SP), DP x TP or a
// two-stage pipeline, on as many processes as the launcher starts (COLLX_RANK,
// COLLX_WORLD_SIZE, COLLX_STORE_ADDR, or torchrun's variables), and compares runs.
//
//   collx-example-mlp [--tp T] [--pp P] [--sp] [--zero S] [--comm fp32|bf16|fp16] [--device]
//                     [--param-dtype fp32|bf16]
//                     [--steps N] [--out FILE] [--skew-layout] [--loss-scale [--inf-at STEP]]
//                     [--die-at STEP]
//   collx-example-mlp --compare REFERENCE RUN TOLERANCE
//   collx-example-mlp --has-device      (exit 0 with a usable device, else 77 saying why)
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "collx/collx.h"
#include "collx/parallel.h"
#include "examples/mlp/compare.h"
#include "examples/mlp/trainer.h"

namespace {

int usage(const char* why) {
  std::fprintf(stderr,
               "collx-example-mlp: %s\nusage: collx-example-mlp [--tp T] [--pp P] [--sp] [--zero 0-3] "
               "[--comm fp32|bf16|fp16] [--device] [--param-dtype fp32|bf16] [--steps N] [--out FILE] [--skew-layout] [--loss-scale [--inf-at STEP]] [--die-at STEP]\n"
               "       collx-example-mlp --compare REFERENCE RUN TOLERANCE\n",
               why);
  return 2;
}

bool parse(int argc, char** argv, mlp::Options* opt, std::string* why) {
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const bool has_value = i + 1 < argc;
    if (a == "--sp") {
      opt->sp = true;
    } else if (a == "--device") {
      opt->device = true;
    } else if (a == "--skew-layout") {
      opt->skew_layout = true;
    } else if (a == "--loss-scale") {
      opt->loss_scale = true;
    } else if (!has_value) {
      *why = "unknown option or missing value: " + a;
      return false;
    } else if (a == "--tp") {
      opt->tp = std::atoi(argv[++i]);
    } else if (a == "--pp") {
      opt->pp = std::atoi(argv[++i]);
    } else if (a == "--zero") {
      opt->zero = std::atoi(argv[++i]);
    } else if (a == "--die-at") {
      opt->die_at = std::atoi(argv[++i]);
    } else if (a == "--inf-at") {
      opt->inf_at = std::atoi(argv[++i]);
    } else if (a == "--steps") {
      opt->steps = std::atoi(argv[++i]);
    } else if (a == "--out") {
      opt->out = argv[++i];
    } else if (a == "--param-dtype") {
      const std::string c = argv[++i];
      if (c != "fp32" && c != "bf16") {
        *why = "--param-dtype takes fp32 or bf16";
        return false;
      }
      opt->param_dtype = c == "bf16" ? COLLX_BFLOAT16 : COLLX_FLOAT32;
    } else if (a == "--comm") {
      const std::string c = argv[++i];
      if (c != "fp32" && c != "bf16" && c != "fp16") {
        *why = "--comm takes fp32, bf16 or fp16";
        return false;
      }
      opt->comm_dtype = c == "bf16" ? COLLX_BFLOAT16 : c == "fp16" ? COLLX_FLOAT16 : COLLX_FLOAT32;
    } else {
      *why = "unknown option: " + a;
      return false;
    }
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc >= 2 && std::strcmp(argv[1], "--compare") == 0) {
    if (argc != 5) return usage("--compare takes REFERENCE RUN TOLERANCE");
    return mlp::compare_runs(argv[2], argv[3], std::atof(argv[4]));
  }
  if (argc == 2 && std::strcmp(argv[1], "--has-device") == 0) {
    void* p = nullptr;
    if (collx_device_alloc(1, &p) != COLLX_OK) {
      std::fprintf(stderr, "collx-example-mlp: %s\n", collx_last_error(nullptr));
      return 77;  // ctest's SKIP_RETURN_CODE of the GPU cases
    }
    collx_device_free(p);
    return 0;
  }
  mlp::Options opt;
  std::string why;
  if (!parse(argc, argv, &opt, &why)) return usage(why.c_str());
  mlp::use_device_memory(opt.device);
  collx_comm_t world = nullptr;
  collx_status_t st = collx_comm_create_from_env(nullptr, &world);
  if (st != COLLX_OK) {
    std::fprintf(stderr, "collx-example-mlp: collx_comm_create_from_env: %s\n", collx_last_error(nullptr));
    return 1;
  }
  int rc = 0;
  try {
    mlp::train(opt, world);
  } catch (const mlp::Failure& f) {
    int32_t rank = -1;
    collx_comm_rank(world, &rank);
    std::fprintf(stderr, "collx-example-mlp: rank %d: %s\n", rank, f.message.c_str());
    rc = 1;
  }
  collx_comm_destroy(world);
  return rc;
}
