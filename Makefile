# Thin wrapper over CMake presets. `make run` and `make test` are the two
# commands README.md opens with.
JOBS ?= $(shell nproc)
.PHONY: all deps build build-asan build-clang build-fuzz build-prod run test clean purity

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

build-prod: deps
	@cmake --preset prod >/dev/null
	@cmake --build --preset prod -j $(JOBS)

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
test: purity build build-asan build-clang build-prod build-fuzz
	@tools/run_tests.sh
