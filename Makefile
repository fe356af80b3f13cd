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

# The suite under AddressSanitizer + UndefinedBehaviorSanitizer, and under ThreadSanitizer.
test-asan: deps
	cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCOLLX_SANITIZE=address,undefined
	cmake --build build-asan -j $(JOBS)
	cd build-asan && HWLOC_COMPONENTS=-pci ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:allocator_may_return_null=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
	  ctest --output-on-failure --timeout 2400 -j 2 -LE "packaging|python"

test-tsan: deps
	cmake -S . -B build-tsan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCOLLX_SANITIZE=thread
	cmake --build build-tsan -j $(JOBS)
	cd build-tsan && UCX_MEM_EVENTS=no UCX_MEM_MALLOC_HOOKS=no UCX_MEM_MMAP_HOOK_MODE=none HWLOC_COMPONENTS=-pci \
	  TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1 \
	  ctest --output-on-failure --timeout 2400 -j 2 -LE "packaging|python"

# The libFuzzer targets (fuzz/, docs/security.md), built with clang in build-fuzz-clang and run
# FUZZ_RUNS times each from fuzz/corpus/; needs clang (apt-get install -y clang).
FUZZ_TARGET ?= all
FUZZ_RUNS ?= 1000000
fuzz: deps
	./fuzz/run.sh $(FUZZ_TARGET) $(FUZZ_RUNS)

clean:
	rm -rf $(BUILD_DIR) build-asan build-tsan
