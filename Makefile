# Thin wrapper over CMake. `make bench` and `make test` work on a fresh Debian 12 machine:
# they install missing packages (tools/install-deps.sh), configure, build, then run.
BUILD_DIR ?= build
BUILD_TYPE ?= Release
JOBS ?= $(shell nproc)
NP ?= 4
BENCH_ARGS ?= -b 8 -e 64M -f 4

.PHONY: all deps configure build bench test clean

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

clean:
	rm -rf $(BUILD_DIR)
