# Thin wrapper over CMake. `make bench` and `make test` work on a fresh Debian 12 machine:
# they install missing packages (tools/install-deps.sh), configure, build, then run.
BUILD_DIR ?= build
BUILD_TYPE ?= Release
JOBS ?= $(shell nproc)
NP ?= 4
BENCH_ARGS ?= -b 8 -e 64M -f 4

.PHONY: all deps configure build bench test test-asan test-tsan fuzz clean

all: build

deps:
	@./tools/install-deps.sh

$(BUILD_DIR)/CMakeCache.txt:
	cmake -S . -B $(BUILD_DIR) -G Ninja -DCMAKE_BUILD_TYPE=$(BUILD_TYPE)

configure: deps $(BUILD_DIR)/CMakeCache.txt

build: configure
	cmake --build $(BUILD_DIR) -j $(JOBS)

bench: build
	$(BUILD_DIR)/bench/collx-bench allreduce --np $(NP) $(BENCH_ARGS)

test: build
	cd $(BUILD_DIR) && ctest --output-on-failure --timeout 1200 -j 2

# The suite under AddressSanitizer + UndefinedBehaviorSanitizer, and under ThreadSanitizer, each
# in its own build folder. To keep them cheap enough for CI (.ci/run runs test-asan after test):
# -O1 with line tables only (-g1: reports keep file:line, no variable info), GPU code for sm_90
# only (device code is not instrumented; the plain build checks the full list), and only what
# ctest runs (no MPI baseline, Google Benchmark or GPU benchmarks). Tests labelled packaging
# (install trees) and python (ctypes over a sanitized libcollx.so) are left out, and so is the
# emulated-GPU tier (gpu-emulated): about 4 minutes under ASan, over CI's budget; it passed
# ASan + UBSan once it stopped calling memcmp on empty results (gpu_cuda_kernels_test).
SAN_OPT = -O1 -DNDEBUG
SAN_CMAKE = -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_C_FLAGS_RELWITHDEBINFO="$(SAN_OPT)" -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="$(SAN_OPT)" \
  -DCOLLX_SANITIZE_DEBUG=-g1 -DCOLLX_BUILD_BENCH_EXTRAS=OFF -DCMAKE_CUDA_ARCHITECTURES=90
SAN_CTEST = ctest --output-on-failure --timeout 2400 -j 2 -LE "packaging|python|gpu-emulated"
# Suppressions: third-party libraries only, each with its reason (tools/sanitizers/).
SAN_SUPP = $(CURDIR)/tools/sanitizers

test-asan: deps
	cmake -S . -B build-asan $(SAN_CMAKE) -DCOLLX_SANITIZE=address,undefined
	cmake --build build-asan -j $(JOBS)
	cd build-asan && HWLOC_COMPONENTS=-pci \
	  ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:allocator_may_return_null=1 \
	  LSAN_OPTIONS=suppressions=$(SAN_SUPP)/lsan.supp:print_suppressions=0 \
	  UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
	  $(SAN_CTEST)

test-tsan: deps
	cmake -S . -B build-tsan $(SAN_CMAKE) -DCOLLX_SANITIZE=thread
	cmake --build build-tsan -j $(JOBS)
	cd build-tsan && UCX_MEM_EVENTS=no UCX_MEM_MALLOC_HOOKS=no UCX_MEM_MMAP_HOOK_MODE=none HWLOC_COMPONENTS=-pci \
	  TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1:allocator_may_return_null=1:suppressions=$(SAN_SUPP)/tsan.supp \
	  $(SAN_CTEST)

# The libFuzzer targets (fuzz/, docs/security.md), built with clang in build-fuzz-clang and run
# FUZZ_RUNS times each from fuzz/corpus/; needs clang (apt-get install -y clang).
FUZZ_TARGET ?= all
FUZZ_RUNS ?= 1000000
fuzz: deps
	./fuzz/run.sh $(FUZZ_TARGET) $(FUZZ_RUNS)

clean:
	rm -rf $(BUILD_DIR) build-asan build-tsan
