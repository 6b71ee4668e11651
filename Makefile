# The two entry points of the README. Both set everything up on a fresh machine (Python 3.11, a JDK 17
# and Maven on PATH): a virtualenv, the package, the jars (cached in ~/.cache/hbase-ingest) and the
# local Kafka + HBase stack.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
# promtool checks docs/ops/alerts.yml in the tests: taken from Debian's prometheus package and
# extracted next to the virtualenv (installing the package would start a Prometheus server)
PROMTOOL := $(VENV)/prometheus/usr/bin/promtool

# the unit tests also run under each of these that the machine has (on PATH as python3.N, or pyenv's),
# each in a virtualenv of its own (.venv-3.N); the integration tests run under $(PYTHON) only
OTHER_PYTHONS ?= 3.12 3.13 3.14

.PHONY: demo test install kerberos netfilter stack-up stack-up-cdc stack-down lint test-pythons sanitize bench \
	bench-scale

demo: install
	$(BIN)/hbase-ingest demo

# the tests need the CDC part too (PostgreSQL 15 from the distribution, Kafka Connect with Debezium), the
# schema registry (Apicurio Registry) and the Kerberos part (an MIT KDC, a Kerberized HBase)
test: install kerberos netfilter lint sanitize test-pythons stack-up-cdc $(PROMTOOL)
	PROMTOOL=$(PROMTOOL) $(BIN)/python -m pytest --durations=40

# the virtualenvs are made one after the other, then the versions' unit tests run side by side (one
# process each; their output is shown per version once all have ended). They check that every part
# runs under each version: the property tests of the compiled parts take a quarter of their examples
# there (tests/budget.py), the main run under $(PYTHON) takes them all
test-pythons: install $(PROMTOOL)
	@ran=""; for v in $(OTHER_PYTHONS); do \
	  py=""; \
	  for c in $$(ls -d $$HOME/.pyenv/versions/$$v.*/bin/python 2>/dev/null | sort -V | tail -1) $$(command -v python$$v); do \
	    if $$c --version >/dev/null 2>&1; then py=$$c; break; fi; \
	  done; \
	  if [ -z "$$py" ]; then echo "== Python $$v: not on this machine, its unit tests not run"; continue; fi; \
	  stale=""; for f in pyproject.toml $(COMPILED); do [ $$f -nt .venv-$$v/.installed ] && stale=1; done; \
	  if [ ! -f .venv-$$v/.installed ] || [ -n "$$stale" ]; then \
	    $$py -m venv .venv-$$v && .venv-$$v/bin/pip install -q --upgrade pip && \
	    $(PIP_COMPILED) .venv-$$v/bin/pip install -q -e '.[dev]' && touch .venv-$$v/.installed || exit 1; \
	  fi; \
	  $$py --version > .venv-$$v/unit.log; \
	  (PROMTOOL=$(PROMTOOL) TEST_EXAMPLES_SCALE=0.25 .venv-$$v/bin/python -m pytest tests/unit -q -p no:cacheprovider \
	    --basetemp=.venv-$$v/pytest >> .venv-$$v/unit.log 2>&1; echo $$? > .venv-$$v/unit.rc) & \
	  ran="$$ran $$v"; \
	done; \
	wait; failed=0; \
	for v in $$ran; do \
	  echo "== unit tests under $$(head -1 .venv-$$v/unit.log)"; tail -n +2 .venv-$$v/unit.log; \
	  [ "$$(cat .venv-$$v/unit.rc)" = 0 ] || failed=1; \
	done; \
	exit $$failed

install: $(VENV)/.installed

# the compiled parts (COMPILED) under AddressSanitizer and UndefinedBehaviorSanitizer: built into a temporary
# folder (the builds the virtualenv imports stay as they are), then their property tests run against those
# builds (tests/unit/sanitized.py stops the run unless they are the ones in use), one process per test file
# side by side, as they are CPU-bound and take minutes this way. The interpreter is not built with the
# sanitizers, so their runtimes (gcc's: the build uses the Python's compiler, gcc on Debian) are preloaded;
# PYTHONMALLOC=malloc lets ASan see Python's objects; no leak check, as CPython's own allocations at exit
# are not leaks of ours. --capture=sys leaves the process's stderr alone, so that a sanitizer's report, which
# ends the process, is not lost in pytest's capture; the tests run about 4 times slower than without the
# sanitizers, hence the longer timeout, the slowest named, and a third of their examples (TEST_EXAMPLES_SCALE).
SANITIZE_TESTS := tests/unit/core/test_routerun.py tests/unit/core/test_route_forms.py tests/unit/test_thrift2_putwire.py \
	tests/unit/native/test_multiwire.py tests/unit/native/test_multiread.py
SANITIZE_ENV := ASAN_OPTIONS=detect_leaks=0 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 PYTHONMALLOC=malloc \
	TEST_EXAMPLES_SCALE=0.3
SANITIZE_PYTEST := -p tests.unit.sanitized -p no:cacheprovider --capture=sys --timeout=900 --durations=3

sanitize: install
	$(call apt_need,gcc,test -f "$$(gcc -print-file-name=libasan.so)" && test -f "$$(gcc -print-file-name=libubsan.so)")
	set -e; dir=$$(mktemp -d); trap 'rm -rf "$$dir"' EXIT; \
	$(BIN)/python -m tests.unit.sanitized "$$dir"; \
	runtimes="$$(gcc -print-file-name=libasan.so) $$(gcc -print-file-name=libubsan.so)"; pids=""; \
	for t in $(SANITIZE_TESTS); do \
	  env LD_PRELOAD="$$runtimes" $(SANITIZE_ENV) $(BIN)/python -m pytest $(SANITIZE_PYTEST) \
	    --sanitized-builds "$$dir" "$$t" >"$$dir/$$(basename "$$t").log" 2>&1 & pids="$$pids $$!"; \
	done; \
	status=0; for p in $$pids; do wait $$p || status=1; done; cat "$$dir"/*.log; exit $$status

$(PROMTOOL):
	rm -rf $(VENV)/prometheus && mkdir -p $(VENV)/prometheus
	cd $(VENV)/prometheus && apt-get download -q prometheus 2>/dev/null && dpkg-deb -x prometheus_*.deb .

# the package's build compiles COMPILED (hatch_build.py); here a failed compile stops the set-up, where a
# user's install would go on with the pure-Python form
COMPILED := hatch_build.py connectors/hbase/_putwire.c pipeline/core/routes/_routerun.c connectors/hbase/native/_multiwire.c
PIP_COMPILED := HBASE_INGEST_REQUIRE_COMPILED=1

$(VENV)/.installed: pyproject.toml $(COMPILED)
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(PIP_COMPILED) $(BIN)/pip install -q -e '.[dev]'
	touch $@

stack-up: install
	$(BIN)/hbase-ingest stack up --secure

stack-up-cdc: install kerberos
	$(BIN)/hbase-ingest stack up --secure --cdc --registry --kerberos

# Kerberos for the tests: MIT's KDC and client tools from the distribution (run as root on a fresh machine,
# as CI does; otherwise install them first), and the gssapi package, which builds against libkrb5-dev
KRB5_PKGS := krb5-kdc krb5-admin-server krb5-user libkrb5-dev
kerberos: $(VENV)/.kerberos

# apt-get install $(1) unless the shell test $(2) passes (as root on a fresh machine, as CI does; otherwise
# install them first)
define apt_need
	@if ! { $(2); } >/dev/null 2>&1; then \
	  if [ "$$(id -u)" != 0 ]; then echo "the tests need: sudo apt-get install $(1)"; exit 1; fi; \
	  DEBIAN_FRONTEND=noninteractive apt-get install -y -q $(1) >/dev/null || \
	    { apt-get update -q >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -q $(1) >/dev/null; } \
	    || exit 1; \
	fi
endef

$(VENV)/.kerberos: $(VENV)/.installed
	$(call apt_need,$(KRB5_PKGS),command -v krb5kdc && command -v krb5-config)
	$(PIP_COMPILED) $(BIN)/pip install -q -e '.[dev,kerberos]'
	touch $@

# the network-partition fault test drops a region server's packets with iptables (needs root)
netfilter:
	$(call apt_need,iptables,command -v iptables && command -v ip6tables)

stack-down:
	$(BIN)/hbase-ingest stack down

lint: install
	$(BIN)/ruff check pipeline connectors devstack tests bench hatch_build.py
	$(BIN)/mypy
	$(BIN)/lint-imports

bench: install stack-up
	$(BIN)/python -m bench

# scale-out with 1, 2 and 3 worker processes: needs the local cluster (2 region servers, 2 gateways),
# which runs in a state folder of its own (the default stack's data stays as it is) on the default
# ports, so the default stack is stopped first; `make stack-up` brings it back
BENCH_CLUSTER := HBASE_INGEST_STACK__STATE_DIR=$(HOME)/.local/state/hbase-ingest/bench-cluster
bench-scale: install
	$(BIN)/hbase-ingest stack down
	$(BENCH_CLUSTER) $(BIN)/hbase-ingest stack up --region-servers 2 --gateways 2
	$(BENCH_CLUSTER) $(BIN)/python -m bench.bench_scale_out
	$(BENCH_CLUSTER) $(BIN)/hbase-ingest stack down
