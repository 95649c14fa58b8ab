# Makefile - thin wrapper over CMake.
#   make         build the library, the kfuse CLI and the tests (GPU backend if nvcc is found)
#   make test    build and run every test: the C suite and 1000 random cases (fixed
#                seed) on every backend present (and, quick, on the baseline copy of the
#                CPU kernels: KFUSE_CPU_ISA=baseline),
#                the suite again under AddressSanitizer + UBSan, the GPU kernels' suite
#                and random cases on the GPU emulator at warp 32 (under ASan + UBSan)
#                and warp 64 (and there under other launch geometries)
#                (KF_GPU=EMU: the CUDA/HIP sources compiled as C++ and run on the CPU),
#                and the Python tests when PyTorch is importable
#   make bench   build and run `kfuse bench` on the best backend present
#   make install PREFIX=/usr/local
BUILD ?= build
JOBS ?= $(shell nproc 2>/dev/null || echo 2)
PREFIX ?= /usr/local
PYTHON ?= python3
CMAKE_FLAGS ?=

.PHONY: all test test-c test-asan test-emu test-python bench install clean

all:
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release -DCMAKE_INSTALL_PREFIX=$(PREFIX) $(CMAKE_FLAGS)
	cmake --build $(BUILD) -j $(JOBS)

test: test-c test-asan test-emu test-python

test-c: all
	@set -e; for t in $(BUILD)/test_*; do [ -x "$$t" ] || continue; echo "== $$t"; "$$t"; done
	@echo "== $(BUILD)/test_suite on the baseline copy of the CPU kernels (KFUSE_CPU_ISA=baseline)"
	KFUSE_CPU_ISA=baseline ./$(BUILD)/test_suite --backend cpu --quick
	@echo "== $(BUILD)/test_suite --fuzz: random valid cases (fixed seed) on every backend present"
	./$(BUILD)/test_suite --fuzz 1000 --seed 1
	@echo "== $(BUILD)/test_suite with OMP_NUM_THREADS past OMP_THREAD_LIMIT (CPU scratch is sized by the threads a region gets)"
	OMP_NUM_THREADS=1073741824 OMP_THREAD_LIMIT=2 ./$(BUILD)/test_suite --backend cpu --quick --op softmax --op rms_norm
	./$(BUILD)/kfuse info
	./$(BUILD)/kfuse verify --backend cpu --quick
	./scripts/check_readme.sh $(BUILD)
	sh tests/cli_test.sh $(BUILD)/kfuse

test-asan:
	cmake -S . -B $(BUILD)-asan -DCMAKE_BUILD_TYPE=Debug -DKF_GPU=OFF -DKF_SANITIZE=ON
	cmake --build $(BUILD)-asan -j $(JOBS)
	ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:allocator_may_return_null=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
	  sh -c 'set -e; for t in $(BUILD)-asan/test_*; do [ -x "$$t" ] || continue; echo "== $$t --quick"; "$$t" --quick; done; \
	    echo "== $(BUILD)-asan/test_suite --backend cpu --fuzz 200"; $(BUILD)-asan/test_suite --backend cpu --fuzz 200 --seed 2'

# The GPU backend's kernels on the emulator (src/gpu/vendor_emu.h): the quick suite and the
# tool tests at warp 32 under AddressSanitizer + UBSan (device buffers are host heap there,
# so out-of-bounds and misaligned kernel accesses are reported), and at warp 64 as built
# (there with two emulated devices: contexts on each, a launch given the other's memory fails).
EMU_SAN_ENV = ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:allocator_may_return_null=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
test-emu:
	cmake -S . -B $(BUILD)-emu32 -DCMAKE_BUILD_TYPE=RelWithDebInfo -DKF_GPU=EMU -DKF_EMU_WARP=32 -DKF_SANITIZE=ON
	cmake --build $(BUILD)-emu32 -j $(JOBS) --target test_suite test_tools test_emu
	$(EMU_SAN_ENV) $(BUILD)-emu32/test_emu
	@echo "== $(BUILD)-emu32/test_suite --backend gpu --quick (GPU kernels emulated, warp 32, ASan + UBSan)"
	$(EMU_SAN_ENV) $(BUILD)-emu32/test_suite --backend gpu --quick
	$(EMU_SAN_ENV) $(BUILD)-emu32/test_suite --backend gpu --fuzz 1000 --seed 3
	$(EMU_SAN_ENV) $(BUILD)-emu32/test_tools
	cmake -S . -B $(BUILD)-emu64 -DCMAKE_BUILD_TYPE=Release -DKF_GPU=EMU -DKF_EMU_WARP=64
	cmake --build $(BUILD)-emu64 -j $(JOBS) --target test_suite test_tools test_emu
	$(BUILD)-emu64/test_emu
	KFUSE_EMU_DEVICES=2 $(BUILD)-emu64/test_emu
	@echo "== $(BUILD)-emu64/test_suite --backend gpu --quick (GPU kernels emulated, warp 64; two devices: the API checks of contexts on both)"
	KFUSE_EMU_DEVICES=2 $(BUILD)-emu64/test_suite --backend gpu --quick
	$(BUILD)-emu64/test_suite --backend gpu --fuzz 2000 --seed 5
	@echo "== random cases under other launch geometries (the tuning variables) and SM counts"
	KFUSE_ROW_CHUNKS=1 KFUSE_ROW_BLOCK=64 $(BUILD)-emu64/test_suite --backend gpu --fuzz 500 --seed 6
	KFUSE_ROW_CHUNKS=8 KFUSE_ROW_BLOCK=512 KFUSE_EMU_SMS=3 $(BUILD)-emu64/test_suite --backend gpu --fuzz 500 --seed 7
	@echo "== the elementwise ops at 1 emulated SM (their large-launch forms at the suite's shapes)"
	for op in glu gelu silu gated_residual; do KFUSE_EMU_SMS=1 $(BUILD)-emu64/test_suite --backend gpu --op $$op || exit 1; done
	$(BUILD)-emu64/test_tools

test-python: all
	@if $(PYTHON) -c "import torch" 2>/dev/null; then \
	  KFUSE_LIBRARY=$(CURDIR)/$(BUILD)/libkfuse.so PYTHONPATH=$(CURDIR)/python \
	    $(PYTHON) -m pytest -q python/tests; \
	else echo "test-python: PyTorch is not importable here; Python tests skipped"; fi

bench: all
	./$(BUILD)/kfuse bench

install: all
	cmake --install $(BUILD)

clean:
	rm -rf $(BUILD) $(BUILD)-asan $(BUILD)-emu32 $(BUILD)-emu64
