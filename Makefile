# The README's two commands are `make serve` and `make test`; each sets up what is missing
# (scripts/setup.sh: Debian packages, the test venv, the default model), builds, then runs.
BUILD_DIR ?= build
BUILD_TYPE ?= Release
JOBS ?= $(shell nproc)
CMAKE_FLAGS ?=
CTEST_FLAGS ?=
PORT ?= 8080
MODEL ?= models/all-MiniLM-L6-v2

.PHONY: all setup configure build test serve bench bench-suites format clean

all: build

setup:
	@bash scripts/setup.sh

$(BUILD_DIR)/CMakeCache.txt:
	cmake -S . -B $(BUILD_DIR) -G Ninja -DCMAKE_BUILD_TYPE=$(BUILD_TYPE) $(CMAKE_FLAGS)

configure: $(BUILD_DIR)/CMakeCache.txt

build: setup configure
	cmake --build $(BUILD_DIR) -j $(JOBS)

test: build
	cd $(BUILD_DIR) && ctest --output-on-failure -j $(JOBS) $(CTEST_FLAGS)

serve: build
	$(BUILD_DIR)/quiver serve --model $(MODEL) --port $(PORT)

# Everything in docs/benchmarks.md: the tokenizer, the worker, then the four suites with the peers
# side by side (tools/peers/setup.sh installs them once; about 30-35 minutes on 2 cores, 20-25
# of them the suites).
bench: build
	@bash scripts/setup.sh --bench
	.venv/bin/python bench/tokenizer_bench.py --build $(BUILD_DIR) --out docs/benchmarks
	$(BUILD_DIR)/quiver_worker_bench --quiver $(BUILD_DIR)/quiver --model $(MODEL) \
	  --clients 8 --seqs 16 --tokens 128 --seconds 20 --threads $(JOBS) \
	  | tee docs/benchmarks/worker.json
	$(MAKE) bench-suites

bench-suites: build
	@bash tools/peers/setup.sh
	BUILD_DIR=$(abspath $(BUILD_DIR)) bash bench/run_suites.sh --threads $(JOBS) --out docs/benchmarks

format:
	git ls-files '*.h' '*.cc' '*.cu' '*.cuh' | xargs clang-format -i

clean:
	rm -rf $(BUILD_DIR)
