# vigil — the two commands: `make demo` and `make test`.
# Both create .venv and install what they need from this tree; system packages come from
# Debian's archive via scripts/system-deps.sh (run as root, as on the build host).

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
DEMO_DIR ?= demo

.PHONY: demo test test-fast test-integration system-deps venv lint bench clean

$(STAMP): pyproject.toml exporters/pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip "setuptools>=77" wheel
	$(BIN)/pip install --quiet -e '.[test]' -e ./exporters
	touch $(STAMP)

venv: $(STAMP)

system-deps:
	bash scripts/system-deps.sh

demo: system-deps $(STAMP)
	$(BIN)/vigil demo --workdir $(DEMO_DIR) $(DEMO_ARGS)

test: system-deps $(STAMP)
	$(BIN)/pytest -q tests

# The fast part alone: no network, no lab hosts.
test-fast: $(STAMP)
	$(BIN)/pytest -q -m "not integration and not lab" tests

test-integration: system-deps $(STAMP)
	$(BIN)/pytest -q -m integration tests

bench: system-deps $(STAMP)
	$(BIN)/python benchmarks/bundle_throughput.py

clean:
	-chattr -R -a $(DEMO_DIR) 2>/dev/null  # the audit log is append-only (chattr +a)
	rm -rf $(VENV) $(DEMO_DIR) build dist *.egg-info
