# vigil — the two commands: `make demo` and `make test`.
# Both create .venv and install what they need from this tree; system packages come from
# Debian's archive via scripts/system-deps.sh (run as root, as on the build host).

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
DEMO_DIR ?= demo

.PHONY: demo demo-upgrade test test-soak test-fast test-integration system-deps venv lint lint-ruff lint-types \
	lint-imports lint-ansible lint-shell lint-host-python bench clean

# pip's output goes to $(VENV)/install.log: a first run prints one line, and all of pip's output
# only when the install fails.
$(STAMP): pyproject.toml exporters/pyproject.toml
	@echo "$(VENV): installing vigil with its test and lint tools (pip's output: $(VENV)/install.log)"
	@mkdir -p $(VENV)
	@{ $(PYTHON) -m venv $(VENV) \
	  && $(BIN)/pip install --upgrade pip "setuptools>=77" wheel \
	  && $(BIN)/pip install -e '.[test,lint]' -e ./exporters; } >$(VENV)/install.log 2>&1 \
	  || { cat $(VENV)/install.log; echo "FAIL: $(VENV): pip install failed (its output above, in $(VENV)/install.log)"; exit 1; }
	@touch $(STAMP)

venv: $(STAMP)

system-deps:
	bash scripts/system-deps.sh

demo: system-deps $(STAMP)
	$(BIN)/vigil demo --workdir $(DEMO_DIR) $(DEMO_ARGS)

# After `make demo`: the lab moved to the next bundle, built from Debian 13's packages.
demo-upgrade: system-deps $(STAMP)
	$(BIN)/vigil demo --workdir $(DEMO_DIR) --upgrade debian-next

# The lab tests and the rest side by side, as two pytest processes sharing one release build
# (tests/lanes.py); one report at the end. PYTEST_ARGS go to both (e.g. PYTEST_ARGS=-x).
test: system-deps $(STAMP)
	$(BIN)/python -m tests.lanes -- $(PYTEST_ARGS)

# The long loops and repetitions (marker `soak`): an upgrade killed at every phase, the 16-node
# lab. Run before calling a change to upgrade, deploy or the lab done.
test-soak: system-deps $(STAMP)
	$(BIN)/pytest -q -m soak --durations=30 $(PYTEST_ARGS) tests

# The fast part alone: no network, no lab hosts.
test-fast: $(STAMP)
	$(BIN)/pytest -q -m "not integration and not lab" tests

test-integration: system-deps $(STAMP)
	$(BIN)/pytest -q -m integration tests

# The checks, in this order; `make -k lint` runs them all even when one fails. The linters' versions
# are pinned in pyproject.toml's `lint` extra, their settings are there too (ansible-lint's in
# .ansible-lint).
lint: lint-ruff lint-types lint-imports lint-ansible lint-shell lint-host-python

lint-ruff: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

# mypy and lint-imports cannot follow the editable install's import hook: they read vigil.* from
# build/typecheck/vigil/, symlinks to the folders. mypy checks the packages that ship py.typed, given
# as folders: with `-p vigil.bundle` it would take the data folder bundle/catalog/ for the module
# bundle/catalog.py.
TYPECHECK := build/typecheck
VIGIL_PACKAGES := basics bundle installer exporters tui

$(TYPECHECK)/vigil: FORCE
	rm -rf $@ && mkdir -p $@
	for p in $(VIGIL_PACKAGES); do if [ -d $$p ]; then ln -s ../../../$$p $@/$$p; fi; done

lint-types: $(STAMP) $(TYPECHECK)/vigil
	$(BIN)/mypy $(patsubst %/py.typed,$(TYPECHECK)/vigil/%,$(wildcard $(addsuffix /py.typed,$(VIGIL_PACKAGES))))

lint-imports: $(STAMP) $(TYPECHECK)/vigil
	PYTHONPATH=$(TYPECHECK) $(BIN)/lint-imports

lint-ansible: $(STAMP)
	PATH="$(CURDIR)/$(BIN):$$PATH" ANSIBLE_HOME="$(CURDIR)/build/ansible-home" ANSIBLE_LINT_SKIP_SCHEMA_UPDATE=1 \
	  $(BIN)/ansible-lint --nocolor -f pep8 roles playbooks

# Every tracked shell script: *.sh and the files whose #! names sh, dash or bash. shellcheck takes
# the dialect from the #! line (POSIX sh for the Slurm prolog and epilog).
lint-shell: system-deps
	git ls-files -z | xargs -0 awk 'FNR == 1 { if (FILENAME ~ /\.sh$$/ || $$0 ~ /^#!.*[\/ ](ba|da)?sh([ \t]|$$)/) print FILENAME; nextfile }' \
	  | xargs -r shellcheck -S style

# The code that runs on the hosts' python3, 3.9 or newer (`common_min_python_version`): the roles'
# modules, the scripts they copy to the hosts, the exporters' wheel. vermin finds what needs a newer
# Python: syntax (match, ...) and the standard library (zip(strict=), datetime.UTC, ...), which ruff's
# py39 target does not know. Annotations are read as evaluated; `X | None` in one is fine on 3.9 with
# `from __future__ import annotations` (vermin's union-types check, off here, would flag it). Its
# tests run under a real 3.9 too: tests/integration/test_host_python39.py.
HOST_PYTHON = $(wildcard roles/*/library/*.py) $(shell find roles/*/files -name '*.py') exporters
VERMIN_FLAGS = --no-config-file --target=3.9- --violations --eval-annotations --no-tips

lint-host-python: $(STAMP)
	$(BIN)/vermin $(VERMIN_FLAGS) $(HOST_PYTHON)

FORCE:

bench: system-deps $(STAMP)
	$(BIN)/python benchmarks/bundle_throughput.py

clean:
	-chattr -R -a $(DEMO_DIR) 2>/dev/null  # the audit log is append-only (chattr +a)
	rm -rf $(VENV) $(DEMO_DIR) build dist *.egg-info
