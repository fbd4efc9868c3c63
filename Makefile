# elfpatch: the two commands a fresh machine needs are `make demo` and `make test`.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
PYTEST_ARGS ?=

.PHONY: all venv fixtures demo test test-fast lint bench fuzz atheris clean

all: test

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[test]' --config-settings editable_mode=compat
	$(PY) -m compileall -q elfpatch
	touch $@

venv: $(STAMP)

fixtures:
	$(MAKE) -C native_tests

demo: venv fixtures
	@bash native_tests/demo.sh

lint: venv
	$(VENV)/bin/ruff check elfpatch tests bench fuzz
	$(VENV)/bin/mypy elfpatch

test: venv fixtures lint
	$(PY) -m pytest $(PYTEST_ARGS)

# The quick loop while editing: no slow campaigns, no cross toolchains, nothing that needs root. On FAST_JOBS
# pytest-xdist workers, a test file per worker (its module fixtures as in a serial run); the native fixtures are
# built above, before pytest, so no worker builds them. FAST_JOBS=0 runs it in one process.
FAST_JOBS ?= 2
test-fast: venv fixtures lint
	$(PY) -m pytest -m "not slow and not cross and not root" -n $(FAST_JOBS) --dist loadfile $(PYTEST_ARGS)

bench: venv fixtures
	$(PY) bench/stripped.py
	$(PY) bench/crafted.py
	$(PY) bench/demangle_check.py
	$(PY) bench/bench.py

# The hypothesis campaigns, then the truth machine's (tests/truth/campaign.py): TRUTH_SEEDS programs, 6 builds each.
TRUTH_SEEDS ?= 300
fuzz: venv fixtures
	ELFPATCH_FUZZ_EXAMPLES=20000 $(PY) -m pytest tests -k fuzz $(PYTEST_ARGS)
	$(PY) tests/truth/campaign.py --seeds $(TRUTH_SEEDS) --out build/truth

# Coverage-guided fuzzing (not in CI): atheris is installed on demand; crash-* inputs land in fuzz/out/.
FUZZ_SECONDS ?= 600
atheris: venv fixtures
	$(PY) -m pip install --quiet atheris
	mkdir -p fuzz/out && cd fuzz/out && ../../$(PY) ../atheris_unique.py -max_total_time=$(FUZZ_SECONDS)

clean:
	$(MAKE) -C native_tests clean
	rm -rf $(VENV) .pytest_cache .ruff_cache *.egg-info
