# The two commands of the README:
#   make lab   installs what is missing, builds, runs the main job, says where the report is
#   make test  installs what is missing, builds (-Werror), runs every test, then again under ASan/UBSan
#   make install   builds the installed parts and installs them (PREFIX, DESTDIR: docs/install.md)
#   make uninstall removes what install put (the build directory's install_manifest.txt)
# CUDA=AUTO (default) builds the CUDA backend only where nvcc and a GPU are found;
# CUDA=ON builds it whenever nvcc is found, CUDA=OFF never (CMake's DRIFT_CUDA).
BUILD      ?= build
BUILD_ASAN ?= build-asan
JOBS       ?= $(shell nproc)
LAB_OUT    ?= lab
CUDA       ?= AUTO
# GNU conventions: prefix (or PREFIX) is compiled in (where the installed binary
# looks for its data, share/driftbench); DESTDIR stages the install elsewhere
prefix     ?= /usr/local
PREFIX     ?= $(prefix)
DESTDIR    ?=

MAKEFLAGS += --no-print-directory

.PHONY: all deps configure build build-cli build-asan test test-fast test-asan lab bench clean install uninstall
all: build

# the test targets also install PyTorch (the PyTorch server's e2e test); lab does not pay for it
# not Debian: install-deps.sh names the packages (Fedora, Arch, Homebrew too) and stops; install them,
# then DRIFT_SKIP_DEPS=1 (make lab DRIFT_SKIP_DEPS=1) skips it
deps:
	@bash scripts/install-deps.sh $(if $(filter test test-fast test-asan,$(MAKECMDGOALS)),--test)

configure: deps
	@cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DDRIFT_WERROR=ON -DDRIFT_CUDA=$(CUDA) \
	  -DCMAKE_INSTALL_PREFIX=$(PREFIX) >/dev/null

build: configure
	@cmake --build $(BUILD) -j $(JOBS)

# the CLI alone (what `make lab` needs), quietly unless it fails
build-cli: configure
	@echo "building driftbench in $(BUILD)/ ..."
	@cmake --build $(BUILD) -j $(JOBS) --target driftbench_cli > $(BUILD)/build-cli.log 2>&1 || \
	  { cat $(BUILD)/build-cli.log; exit 1; }

build-asan: deps
	@cmake -S . -B $(BUILD_ASAN) -DCMAKE_BUILD_TYPE=Debug -DDRIFT_WERROR=ON -DDRIFT_SANITIZE=ON -DDRIFT_CUDA=OFF >/dev/null
	@cmake --build $(BUILD_ASAN) -j $(JOBS)

test-fast: build
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

test-asan: build-asan
	cd $(BUILD_ASAN) && ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 \
	  DRIFT_SANITIZED=1 ctest --output-on-failure -j $(JOBS)

test: test-fast test-asan

lab: build-cli
	@./$(BUILD)/driftbench lab --quick --out $(LAB_OUT)

bench: build
	@bash bench/run.sh $(BUILD)

# the installed parts only (not the tests and benches), then cmake --install
install: configure
	@cmake --build $(BUILD) -j $(JOBS) --target driftbench_install_parts
	@DESTDIR="$(DESTDIR)" cmake --install $(BUILD)

uninstall:
	@DESTDIR="$(DESTDIR)" cmake --build $(BUILD) --target uninstall

clean:
	rm -rf $(BUILD) $(BUILD_ASAN)
