# bulkwrite — top-level build.
#
#   make                 build every daemon and tool into bin/
#   make demo            install what is missing, build, run the demo on embedded defaults
#   make check           install what is missing, run every test (unit, fuzz, e2e and fault
#                        tests against the embedded Kafka and a real broker, 4,096
#                        shards on the real broker; then ASan+UBSan and TSan tiers)
#   make docs            regenerate docs/configuration.md from the config key table, and
#                        the metric list and endpoint table of docs/api.md from theirs
#   make SANITIZE=address,undefined check   the same suite under ASan + UBSan
#   make check-tsan                         the unit and embedded e2e tiers under ThreadSanitizer
#   make fuzz [FUZZ_SECONDS=60]             the libFuzzer harnesses from the committed seeds
#   make bench [BENCH_RUNS=3]               throughput, rate precision and isolation as ratios
#                                           against same-run baselines (docs/performance.md)
#   make scale-cluster                      4,096 partitions x 3 replicas on three Kafka nodes,
#                                           measured (opt-in, not in check; docs/performance.md)
#   make install [PREFIX=/usr/local] [DESTDIR=]   the programs, the example config, the docs,
#                                           the systemd units and sysusers file (docs/deployment.md)
#   make uninstall                          removes what install put there, but the config
#   make deb                                the Debian package, built from a copy of the tree,
#                                           into build/deb (docs/deployment.md)

SANITIZE ?=
comma := ,
CC ?= cc
PKGS := rdkafka libconfig libprotobuf-c libmicrohttpd jansson yajl libmariadb libcurl libcrypto gnutls zlib

ifeq ($(SANITIZE),)
BUILD := build/release
BIN := bin
SANFLAGS :=
else
BUILD := build/san-$(subst $(comma),-,$(SANITIZE))
BIN := $(BUILD)/bin
SANFLAGS := -fsanitize=$(SANITIZE) -fno-omit-frame-pointer -fno-sanitize-recover=all
endif


GEN := build/gen
CFLAGS ?= -O2 -g
# The library's folders, one per subsystem (docs/development.md's source tour): basics,
# configuration, the wire codecs, the shard database store, the control plane (the
# compacted topics), the batcher, and the daemons' own parts.
SUBSYSTEMS := common config codec store control batcher proxy consumer
CFLAGS += -std=c11 -Wall -Wextra -Werror -D_DEFAULT_SOURCE -D_GNU_SOURCE -pthread \
          -I$(GEN) $(addprefix -I,$(SUBSYSTEMS)) $(SANFLAGS) $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
LDLIBS := $(shell pkg-config --libs $(PKGS) 2>/dev/null) -lm -pthread
# The configuration a program reads without -c or BULKWRITE_CONF (common/cli.h): the one
# install puts in $(SYSCONFDIR) (from PREFIX, below), compiled into common/cli.c alone
DEFAULT_CONF = $(SYSCONFDIR)/bulkwrite/bulkwrite.conf
DEFAULT_CONF_FLAG = -DBW_DEFAULT_CONF='"$(DEFAULT_CONF)"'
LDFLAGS += $(SANFLAGS)

# the client API (installed: what client teams generate from) and the daemons' own records
PUBLIC_PROTO := proto/bulkwrite/v1/bulkwrite.proto
RECORDS_PROTO := proto/bulkwrite/internal/v1/records.proto
PROTO_C := $(GEN)/bulkwrite/v1/bulkwrite.pb-c.c $(GEN)/bulkwrite/internal/v1/records.pb-c.c
UI_C := $(GEN)/ui_assets.c
API_C := $(GEN)/api_assets.c
VERSION_C := $(GEN)/version.c
LIB_SRC := $(PROTO_C) $(UI_C) $(API_C) $(VERSION_C) $(filter-out %/main.c,$(foreach d,$(SUBSYSTEMS),$(wildcard $(d)/*.c)))
LIB_OBJ := $(patsubst %.c,$(BUILD)/%.o,$(LIB_SRC))
LIB := $(BUILD)/libbulkwrite.a

PROXY_OBJ := $(BUILD)/proxy/main.o
CONSUMER_OBJ := $(BUILD)/consumer/main.o
UNIT_SRC := $(wildcard test/unit/*.c)
UNIT_OBJ := $(patsubst %.c,$(BUILD)/%.o,$(UNIT_SRC))

PROGRAMS := $(BIN)/bw-proxy $(BIN)/bw-consumer $(BIN)/bwctl $(BIN)/bw-kafka-embedded \
            $(BIN)/bw-workload $(BIN)/bw-bench

.PHONY: client-go-gen client-go-unit client-python-gen client-python-unit fault-embedded fault-kafka cluster-kafka scale-cluster lanes throttle bench bench-smoke bench-timers check-lane-embedded check-lane-kafka check-lane-sanitizers fuzz all deps check check-sanitize check-tsan unit e2e backlog fault demo docs docs-check install uninstall install-check installable deb deb-check clean
all: $(PROGRAMS)

deps:
	@scripts/install-deps.sh

# the SRE page's files, built into bw-proxy (proxy/ui.h)
$(UI_C): scripts/embed-ui.sh $(sort $(wildcard ui/*))
	@mkdir -p $(GEN)
	scripts/embed-ui.sh $@ $(sort $(wildcard ui/*))
# the OpenAPI document, served at GET /v1/openapi.yaml (proxy/ui.h)
$(API_C): scripts/embed-ui.sh docs/openapi.yaml
	@mkdir -p $(GEN)
	scripts/embed-ui.sh $@ --table bw_api_assets docs/openapi.yaml

# the release (VERSION) and the commit built (common/version.h: --version, bulkwrite_build_info);
# written again only when either changed, so a new commit relinks and rebuilds one file
# (each make through its own temporary file: the check's lanes run `make all` at once)
$(VERSION_C): FORCE
	@mkdir -p $(GEN)
	@printf '#include "version.h"\nconst char bw_version[] = "%s";\nconst char bw_commit[] = "%s";\n' \
	  "$$(cat VERSION)" "$$(git rev-parse --short=12 HEAD 2>/dev/null || echo unknown)" >$@.$$$$.tmp; \
	  if cmp -s $@.$$$$.tmp $@; then rm $@.$$$$.tmp; else mv $@.$$$$.tmp $@; fi
# (phony: under .SECONDARY below, a plain FORCE counted as an intermediate never remade)
.PHONY: FORCE
FORCE:
# the default configuration's path, in a stamp written again only when it changed: `make
# install PREFIX=/usr` after `make` rebuilds common/cli.c and relinks the programs, so
# they read /etc/bulkwrite/bulkwrite.conf (as git's Makefile does with its prefix)
$(BUILD)/common/cli.o: CFLAGS += $(DEFAULT_CONF_FLAG)
$(BUILD)/common/cli.o: $(BUILD)/default-conf.stamp
$(BUILD)/default-conf.stamp: FORCE
	@mkdir -p $(BUILD)
	@echo '$(DEFAULT_CONF)' >$@.$$$$.tmp; if cmp -s $@.$$$$.tmp $@; then rm $@.$$$$.tmp; else mv $@.$$$$.tmp $@; fi

$(GEN)/bulkwrite/v1/bulkwrite.pb-c.c: $(PUBLIC_PROTO)
	@mkdir -p $(GEN)
	protoc-c --c_out=$(GEN) --proto_path=proto $(PUBLIC_PROTO)

$(GEN)/bulkwrite/internal/v1/records.pb-c.c: $(RECORDS_PROTO) $(GEN)/bulkwrite/v1/bulkwrite.pb-c.c
	@mkdir -p $(GEN)
	protoc-c --c_out=$(GEN) --proto_path=proto $(RECORDS_PROTO)

# every object waits for the generated header
$(BUILD)/%.o: %.c $(PROTO_C)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -MMD -MP -c $< -o $@

# A ThreadSanitizer build links test/tsan/c11threads.o into every program: it routes
# librdkafka's C11 threads and locks through the pthreads TSan intercepts.
ifneq ($(findstring thread,$(SANITIZE)),)
TSAN_OBJ := $(BUILD)/test/tsan/c11threads.o
endif

$(LIB): $(LIB_OBJ)
	rm -f $@ && $(AR) rcs $@ $^

$(BIN)/bw-proxy: $(PROXY_OBJ) $(LIB) $(TSAN_OBJ)
	@mkdir -p $(BIN)
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)
$(BIN)/bw-consumer: $(CONSUMER_OBJ) $(LIB) $(TSAN_OBJ)
	@mkdir -p $(BIN)
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)
$(BIN)/%: $(BUILD)/tools/%.o $(LIB) $(TSAN_OBJ)
	@mkdir -p $(BIN)
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

$(BIN)/unit-tests: $(UNIT_OBJ) $(LIB) $(TSAN_OBJ)
	@mkdir -p $(BIN)
	$(CC) $(LDFLAGS) -o $@ $^ $(shell pkg-config --libs check) $(LDLIBS)

# libFuzzer harnesses (clang; ASan + UBSan): fuzz-request over decoding, validation and
# batching (JSON and protobuf); fuzz-forward holds the protobuf wire reader and the
# ShardBatch writer, and the consumer's ShardBatch reader, against protobuf-c's unpack and pack
# (test/unit/forward_ref.c).
FUZZ_SECONDS ?= 60
FUZZ_CC = clang -O1 -g -std=c11 -D_DEFAULT_SOURCE -D_GNU_SOURCE -pthread -fsanitize=fuzzer,address,undefined \
	  -fno-sanitize-recover=all -I$(GEN) $(addprefix -I,$(SUBSYSTEMS)) -Itest/unit $(DEFAULT_CONF_FLAG) \
	  $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
# (the consumer's files and the proxy's pipeline are not under test, and need their
# main.c's state: consumer.h, proxy.h)
PROXY_STATE_SRC := proxy/producers.c proxy/routes.c proxy/submit.c proxy/release.c proxy/ui.c proxy/changes.c proxy/connect.c
FUZZ_LIB_SRC := $(filter-out $(PROTO_C) $(UI_C) $(API_C) consumer/% $(PROXY_STATE_SRC),$(LIB_SRC)) $(PROTO_C)
build/fuzz/fuzz-request: test/fuzz/fuzz_request.c $(FUZZ_LIB_SRC)
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $^ -o $@ $(LDLIBS)
build/fuzz/fuzz-forward: test/fuzz/fuzz_forward.c test/unit/forward_ref.c $(FUZZ_LIB_SRC)
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $^ -o $@ $(LDLIBS)

# Runs each harness for half of FUZZ_SECONDS from its committed seeds (read-only); what
# it finds new goes to build/fuzz/corpus-NAME, a crash to build/fuzz/crash-*.
FUZZ_RUN = -max_total_time=$$(( ($(FUZZ_SECONDS) + 1) / 2 )) -timeout=10 -rss_limit_mb=4096 -max_len=65536 \
	  -print_final_stats=1 -artifact_prefix=build/fuzz/
fuzz: build/fuzz/fuzz-request build/fuzz/fuzz-forward
	rm -rf build/fuzz/corpus-request build/fuzz/corpus-forward && mkdir -p build/fuzz/corpus-request build/fuzz/corpus-forward
	build/fuzz/fuzz-request $(FUZZ_RUN) build/fuzz/corpus-request test/fuzz/corpus
	build/fuzz/fuzz-forward $(FUZZ_RUN) build/fuzz/corpus-forward test/fuzz/corpus-forward

# ---- tests ------------------------------------------------------------------------
# The tiers run in three lanes side by side (a tier mostly waits on servers, rate limits
# and timeouts, not on the CPU): the embedded-Kafka tiers, the real-broker tiers, and
# ThreadSanitizer then ASan+UBSan, each on its own ports (BW_TEST_PORT_OFFSET). Each line
# says its lane and each tier's time (test/lane.sh); a failure in any fails the check.
check: deps
	$(MAKE) all $(BIN)/unit-tests
	$(MAKE) docs-check install-check deb-check unit client-go-unit client-python-unit
	$(MAKE) -j3 check-lane-embedded check-lane-kafka check-lane-sanitizers
LANE = test/lane.sh $(1) "$(MAKE)" $(2)
check-lane-embedded:
	@$(call LANE,embedded,fuzz e2e-embedded client-go-embedded auth-embedded openapi-embedded browser-embedded fairness-embedded throttle-embedded lanes-embedded control-embedded client-python-embedded bwctl-embedded demo-embedded bench-smoke fault-embedded backlog-embedded)
check-lane-kafka:
	@BW_TEST_PORT_OFFSET=1000 $(call LANE,kafka,e2e-kafka client-go-kafka sasl-kafka members-kafka quotas-kafka control-kafka cluster-kafka throttle-kafka lanes-kafka timers-kafka client-python-kafka bwctl-kafka fault-kafka backlog-kafka failover-kafka shards-4096-kafka)
check-lane-sanitizers:
	@BW_TEST_PORT_OFFSET=2000 $(call LANE,sanitizers,check-tsan check-sanitize)

# The unit tests and the embedded-Kafka tiers again, built with AddressSanitizer and
# UndefinedBehaviorSanitizer (any report fails the run: -fno-sanitize-recover).
check-sanitize:
	@test/lane.sh asan "$(MAKE) SANITIZE=address,undefined BACKLOG_FEED=200000 JOB_OPS=30000" all unit e2e-embedded auth-embedded throttle-embedded lanes-embedded bwctl-embedded fault-embedded backlog-embedded fairness-embedded

# The unit tier, the embedded-Kafka e2e, auth, throttle, bwctl and backlog tiers, and the failover tier (the
# consumer's replica reader runs on a real broker only) under ThreadSanitizer: the daemons'
# threads (dispatcher, workers, alert sender, tails, HTTP), bwctl submit's senders, and librdkafka's, made visible
# by test/tsan/c11threads.c. A report stops the program (halt_on_error).
TSAN_OPTIONS_CHECK := halt_on_error=1 second_deadlock_stack=1 suppressions=$(CURDIR)/test/tsan/suppressions.txt
check-tsan:
	@TSAN_OPTIONS="$(TSAN_OPTIONS_CHECK)" test/lane.sh tsan "$(MAKE) SANITIZE=thread BACKLOG_FEED=200000 JOB_OPS=30000" all unit e2e-embedded auth-embedded throttle-embedded bwctl-embedded backlog-embedded failover-kafka

unit: $(BIN)/unit-tests
	test/run-unit.sh $(BIN)

# The Go client (clients/go, docs/clients.md): its modules come from the Go module proxy
# into build/go. client-go-gen regenerates its committed protobuf and Connect code;
# client-go-unit fails when that code differs from a fresh generation, then runs go vet
# and go test. The client-go tier runs it against a real stack.
client-go-gen:
	scripts/go-client.sh generate
client-go-unit:
	scripts/go-client.sh test

# The Python client (clients/python, docs/clients.md): its packages come from PyPI, pinned,
# into venvs under build/python. client-python-gen regenerates its committed protobuf and
# Connect code; client-python-unit fails when that code differs from a fresh generation,
# then runs its unit tests. The client-python tier runs its live tests on a real stack.
client-python-gen:
	clients/python/scripts/generate.sh
client-python-unit:
	clients/python/scripts/generate.sh --check
	"$$(clients/python/scripts/venv.sh client clients/python/requirements.txt --editable)/bin/python" -m pytest -q \
	    -p no:cacheprovider clients/python/tests --ignore=clients/python/tests/live

# ---- the tiers: test/tiers/NAME.sh MODE, each on the real servers it starts ----------
# One rule runs any tier: `make NAME-embedded` (the embedded Kafka) or `make NAME-kafka`
# (a real Apache Kafka broker). Each tier's head says what it proves:
#   e2e        end to end through the documented interfaces (jobs.sh, doc-examples.sh in it)
#   auth       clients, tokens, roles and certificates against hostile and ordinary callers
#   backlog    a feed faster than its shard, a paused shard, what Kafka keeps and loses
#   fault      one injected fault per run (FAULTS), every row compared after it
#   throttle   the adaptive throttle against a primary and its replica
#   lanes      an urgent lane's share behind a bulk feed on one shard
#   control    shard control at the same moment through two proxies
#   fairness   32 backlogged shards on 2 workers, each one's share
#   browser    the SRE page in headless chromium
#   openapi    docs/openapi.yaml: valid, docs/api.md's endpoints, every answer as it says
#   timers     the delay queue: scheduled one-op jobs on time through a proxy's kill -9
#   client-go  the Go client over Connect (both codecs): a job killed -9 and resumed, a
#              cancel, failures, a full backlog's Retry-After
#   client-python  the Python client over Connect: a sender killed -9 and run again, a
#              cancel, failures, a full backlog's Retry-After, tokens and roles
#   sasl, members, quotas, failover, shards-4096   (real broker only)
#   cluster, scale-cluster                         (three Kafka nodes: `make cluster-kafka`,
#                                                   `make scale-cluster`)
# The sizes: the late feed of backlog (BACKLOG_FEED) and e2e's one-job file (JOB_OPS,
# 300 parts), smaller under the sanitizers, which run several times slower.
BACKLOG_FEED ?= 1000000
JOB_OPS ?= 300000
TIER_ENV = BW_BIN=$(BIN) BW_BACKLOG_FEED=$(BACKLOG_FEED) BW_JOB_OPS=$(JOB_OPS)
TIERS_EMBEDDED := e2e auth backlog throttle lanes control fairness browser timers client-go client-python openapi bwctl demo
TIERS_KAFKA := e2e auth sasl backlog throttle lanes control members quotas failover shards-4096 timers client-go client-python bwctl
$(addsuffix -embedded,$(TIERS_EMBEDDED)): %-embedded: all
	$(TIER_ENV) test/tiers/$*.sh embedded
$(addsuffix -kafka,$(TIERS_KAFKA)): %-kafka: all
	$(TIER_ENV) test/tiers/$*.sh kafka
.PHONY: $(addsuffix -embedded,$(TIERS_EMBEDDED)) $(addsuffix -kafka,$(TIERS_KAFKA))
FAULTS := consumer-kill proxy-kill mysql-down mysql-hang row-locks schema-drift big-rows idle-reaped
fault-embedded: all
	for s in $(FAULTS); do $(TIER_ENV) test/tiers/fault.sh embedded $$s || exit 1; done
fault-kafka: all
	for s in $(FAULTS) broker-restart; do $(TIER_ENV) test/tiers/fault.sh kafka $$s || exit 1; done
cluster-kafka: all
	$(TIER_ENV) test/tiers/cluster.sh cluster
# opt-in, not in check: 4,096 partitions x 3 replicas on three nodes, measured, a setting at a time
scale-cluster: all
	$(TIER_ENV) test/tiers/scale-cluster.sh cluster
# both modes of a tier
e2e: e2e-embedded e2e-kafka
backlog: backlog-embedded backlog-kafka
fault: fault-embedded fault-kafka
throttle: throttle-embedded throttle-kafka
lanes: lanes-embedded lanes-kafka

# make bench: every case BENCH_RUNS (3) times against its baseline, on servers it starts
# itself; the table goes to stdout and build/bench/results.md (test/bench.sh lists the
# knobs). bench-smoke runs every case once at tiny sizes (about 3 minutes, the real-broker
# case left out): it asserts the rows, never the speed, so the harness cannot rot.
bench: deps
	$(MAKE) all
	BW_BIN=$(BIN) test/bench.sh
bench-smoke: all
	BW_BIN=$(BIN) BENCH_SMOKE=1 BENCH_KAFKA=0 test/bench.sh
# the delay queue: a million one-op timers held and released against the same writes
# unscheduled, on a real broker (about half an hour on 2 cores; not in check)
bench-timers: deps
	$(MAKE) all
	BW_BIN=$(BIN) test/bench-timers.sh

demo: deps
	$(MAKE) all
	scripts/demo.sh

docs: $(BIN)/bwctl
	$(BIN)/bwctl config-doc > docs/configuration.md
	$(BIN)/bwctl metrics-doc docs/api.md > $(BUILD)/api.md && mv $(BUILD)/api.md docs/api.md
	$(BIN)/bwctl endpoints-doc docs/api.md > $(BUILD)/api.md && mv $(BUILD)/api.md docs/api.md

docs-check: $(BIN)/bwctl
	@$(BIN)/bwctl config-doc | diff -u docs/configuration.md - \
	  || { echo "docs/configuration.md is stale: run 'make docs'"; exit 1; }
	@$(BIN)/bwctl metrics-doc docs/api.md | diff -u docs/api.md - \
	  || { echo "the metric list in docs/api.md is stale: run 'make docs'"; exit 1; }
	@$(BIN)/bwctl endpoints-doc docs/api.md | diff -u docs/api.md - \
	  || { echo "the endpoint table in docs/api.md is stale: run 'make docs'"; exit 1; }
	@scripts/include-cycles.sh || { echo "the includes above form a circle: a module must not include one that includes it"; exit 1; }
	@scripts/check-monitoring.sh
	@scripts/check-docs-defaults.sh $(BIN)/bwctl

# ---- installation (docs/deployment.md) ------------------------------------------------
# The daemons and bwctl; the test tools (bw-workload, which writes straight into Kafka,
# bw-kafka-embedded, bw-bench) stay in bin/. An existing config is never overwritten: the
# new example goes next to it as bulkwrite.conf.example.
PREFIX ?= /usr/local
DESTDIR ?=
BINDIR ?= $(PREFIX)/bin
SYSCONFDIR ?= $(if $(filter /usr,$(PREFIX)),/etc,$(PREFIX)/etc)
DOCDIR ?= $(PREFIX)/share/doc/bulkwrite
INCLUDEDIR ?= $(PREFIX)/include
DATADIR ?= $(PREFIX)/share
UNITDIR ?= $(PREFIX)/lib/systemd/system
SYSUSERSDIR ?= $(PREFIX)/lib/sysusers.d
INSTALL_PROGRAMS := bw-proxy bw-consumer bwctl
UNITS := bw-proxy.service bw-consumer.service bw-consumer@.service
CONF_DIR = $(DESTDIR)$(SYSCONFDIR)/bulkwrite

# builds what make install installs (debian/rules builds this, not the test tools)
installable: $(addprefix $(BIN)/,$(INSTALL_PROGRAMS))

install: installable
	for p in $(INSTALL_PROGRAMS); do install -D -m 0755 $(BIN)/$$p $(DESTDIR)$(BINDIR)/$$p || exit 1; done
	if [ -e $(CONF_DIR)/bulkwrite.conf ]; then \
	  install -D -m 0644 conf/bulkwrite.conf $(CONF_DIR)/bulkwrite.conf.example && \
	  echo "kept $(CONF_DIR)/bulkwrite.conf; the new example is bulkwrite.conf.example next to it"; \
	else install -D -m 0644 conf/bulkwrite.conf $(CONF_DIR)/bulkwrite.conf; fi
	install -D -m 0644 README.md $(DESTDIR)$(DOCDIR)/README.md
	install -D -m 0644 $(PUBLIC_PROTO) $(DESTDIR)$(INCLUDEDIR)/bulkwrite/v1/bulkwrite.proto
	for f in docs/*.md docs/openapi.yaml; do install -D -m 0644 $$f $(DESTDIR)$(DOCDIR)/$$f || exit 1; done
	install -D -m 0644 conf/bulkwrite.conf $(DESTDIR)$(DOCDIR)/examples/bulkwrite.conf
	install -D -m 0644 conf/clients.example.conf $(DESTDIR)$(DOCDIR)/examples/clients.example.conf
	for f in bulkwrite.rules.yml grafana-dashboard.json; do \
	  install -D -m 0644 monitoring/$$f $(DESTDIR)$(DATADIR)/bulkwrite/monitoring/$$f || exit 1; done
	@mkdir -p $(BUILD)/systemd
	for u in $(UNITS); do \
	  sed -e 's|@BINDIR@|$(BINDIR)|g' -e 's|@SYSCONFDIR@|$(SYSCONFDIR)|g' -e 's|@DOCDIR@|$(DOCDIR)|g' \
	      systemd/$$u > $(BUILD)/systemd/$$u && \
	  install -D -m 0644 $(BUILD)/systemd/$$u $(DESTDIR)$(UNITDIR)/$$u || exit 1; done
	install -D -m 0644 systemd/bulkwrite.sysusers $(DESTDIR)$(SYSUSERSDIR)/bulkwrite.conf

uninstall:
	rm -f $(addprefix $(DESTDIR)$(BINDIR)/,$(INSTALL_PROGRAMS) bw-workload) $(addprefix $(DESTDIR)$(UNITDIR)/,$(UNITS)) \
	      $(DESTDIR)$(SYSUSERSDIR)/bulkwrite.conf $(CONF_DIR)/bulkwrite.conf.example
	rm -rf $(DESTDIR)$(DOCDIR) $(DESTDIR)$(INCLUDEDIR)/bulkwrite $(DESTDIR)$(DATADIR)/bulkwrite
	@echo "left $(CONF_DIR)/bulkwrite.conf and the bulkwrite user in place"

# make install into temp dirs (PREFIX=/usr and /opt/bulkwrite), the tree checked,
# the units verified by systemd-analyze; needs no root and starts no server
install-check: installable
	test/tiers/install.sh

# The Debian package (debian/): dpkg-buildpackage -b in a copy of the tree's files (those
# git tracks or would, as they are now) under build/deb/src, so that neither the tree's own
# build nor the folder above it is touched; the .deb and .buildinfo/.changes land in
# build/deb. A real build from scratch (DEB_BUILD_OPTIONS: parallel=2 unless set), with
# none of this make's flags (-s, -j) and its full log in build/deb/src/build.log.
DEB_DIR := build/deb
DEB_BUILD_OPTIONS ?= parallel=2
deb:
	rm -rf $(DEB_DIR) && mkdir -p $(DEB_DIR)/src/bulkwrite
	git ls-files -z --cached --others --exclude-standard | \
	  tar --null -T - --ignore-failed-read -cf - 2>/dev/null | tar -xf - -C $(DEB_DIR)/src/bulkwrite
	@test -x $(DEB_DIR)/src/bulkwrite/debian/rules || { echo "make deb: the copy under $(DEB_DIR)/src has no debian/rules (make deb copies the files git lists: it needs a git checkout)"; exit 1; }
	cd $(DEB_DIR)/src/bulkwrite && env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL DEB_BUILD_OPTIONS="$(DEB_BUILD_OPTIONS)" \
	  dpkg-buildpackage -us -uc -b >../build.log 2>&1 \
	  || { tail -n 40 ../build.log; echo "make deb: dpkg-buildpackage failed (log: $(DEB_DIR)/src/build.log)"; exit 1; }
	mv $(DEB_DIR)/src/*.deb $(DEB_DIR)/src/*.buildinfo $(DEB_DIR)/src/*.changes $(DEB_DIR)/
	@ls $(DEB_DIR)/*.deb

# make deb, lintian on the .deb, then the package installed on this machine with dpkg
# and purged (test/tiers/deb.sh: as root; it starts no daemon)
deb-check:
	test/tiers/deb.sh

clean:
	rm -rf build bin

# (not build/deb: make deb's copy of the tree, with its own build)
-include $(shell find build -path build/deb -prune -o -name '*.d' -type f -print 2>/dev/null)

# keep tool objects: they are not intermediate files to delete
.SECONDARY:
