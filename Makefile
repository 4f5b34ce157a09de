# Thin wrapper over CMake presets. `make run` and `make test` are the two
# commands README.md opens with.
JOBS ?= $(shell nproc)
.PHONY: all deps build build-asan build-clang build-fuzz build-afl build-prod build-pgo build-tsan build-rdma build-cuda run test test-quick clean purity

all: build

deps:
	@tools/deps.sh

build: deps
	@cmake --preset default >/dev/null
	@cmake --build --preset default -j $(JOBS)

build-asan: deps
	@cmake --preset asan >/dev/null
	@cmake --build --preset asan -j $(JOBS)

build-clang: deps
	@cmake --preset clang >/dev/null
	@cmake --build --preset clang -j $(JOBS)

build-fuzz: deps
	@cmake --preset fuzz >/dev/null
	@cmake --build --preset fuzz -j $(JOBS)

# AFL++ (afl-clang-fast from Debian's afl++): the same fuzz/ targets in
# persistent mode with shared-memory input (libAFLDriver).
build-afl: deps
	@cmake --preset afl >/dev/null
	@cmake --build --preset afl -j $(JOBS)

build-prod: deps
	@cmake --preset prod >/dev/null
	@cmake --build --preset prod -j $(JOBS)

# The production build with gcc's profile-guided optimization: built,
# trained on kvsim sweeps, rebuilt (tools/build_pgo.sh).
build-pgo: deps
	@JOBS=$(JOBS) tools/build_pgo.sh

# The threaded production path under ThreadSanitizer: kvnode only (Criterion
# cannot start under TSan, so the suites run in the other builds).
build-tsan: deps
	@cmake --preset tsan >/dev/null
	@cmake --build --preset tsan -j $(JOBS) --target kvnode

# rdma-core binding (pkg-config libibverbs) and the CUDA HBM path: compile
# everywhere; they run where an RDMA NIC / a GPU is. build-cuda is skipped
# where no nvcc is found.
build-rdma: deps
	@cmake --preset rdma >/dev/null
	@cmake --build --preset rdma -j $(JOBS)

# nvcc from PATH, else the toolkit's default place.
NVCC ?= $(shell command -v nvcc 2>/dev/null || { [ -x /usr/local/cuda/bin/nvcc ] && echo /usr/local/cuda/bin/nvcc; })
build-cuda: deps
	@if [ -n "$(NVCC)" ]; then cmake --preset cuda -DCMAKE_CUDA_COMPILER=$(NVCC) >/dev/null && \
	  cmake --build --preset cuda -j $(JOBS); else echo "build-cuda: nvcc not found; skipped"; fi

purity:
	@tools/check_core_purity.sh

# The demo of the core on a few P/D requests, then a default sweep of
# generated scenarios with its table.
run: build
	@build/bin/kvdemo
	@echo
	@echo "== kvsim sweep --seeds 1..2000 --jobs $(JOBS)"
	@build/bin/kvsim sweep --seeds 1..2000 --jobs $(JOBS)

# Every suite, in the checked gcc build and the ASan+UBSan clang build, plus
# the production build (proves bug switches compile out), the fuzz targets
# and the purity gate.
test: purity build build-asan build-clang build-prod build-pgo build-fuzz build-afl build-tsan build-rdma build-cuda
	@tools/run_tests.sh

# The quick tier (about a minute after the build): the checked build's
# suites and determinism on 50 seeds of each workload (tools/quick_tests.sh).
test-quick: build
	@tools/quick_tests.sh

# Every preset's build tree (each is build or build-NAME).
clean:
	@rm -rf build build-*
