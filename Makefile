# snow-connect. `make demo` runs the connectors on embedded defaults; `make test` runs every test.
CARGO ?= cargo
DEMO_SECONDS ?= 30
BENCH_ROWS ?= 1000000
VERSION := $(shell sed -n '/^\[workspace.package\]/,/^\[/s/^version = "\(.*\)"/\1/p' Cargo.toml)
GUESTS := -p guest-source -p guest-sink -p rogue-guest -p rogue-sink -p http-adapter -p host-shim -p transform-explode -p rogue-transform
# The same command tests/guest-artifacts runs, so both share one build in target/guests.
WASM_BUILD := $(CARGO) build --target wasm32-wasip2 --profile wasm-release --target-dir target/guests $(GUESTS)

.PHONY: setup demo test bench bench-static hosts soak fuzz wasm build kafka-up kafka-down lint fmt clean connect-plugin release release-test audit

## What every target needs on a fresh machine: the pinned toolchain with its wasm32-wasip2 target,
## rustfmt and clippy (installed through rustup); missing system packages are named, not guessed.
setup:
	@bash tests/setup.sh

## Build the guest components (target/guests/wasm32-wasip2/wasm-release/*.wasm), each signed with the
## DEVELOPMENT key in tests/keys (a Sigstore bundle beside it, <file>.sigstore.json): for tests and demos only.
wasm: setup
	$(WASM_BUILD)
	$(CARGO) build -p snow-connect
	@for w in guest_source guest_sink rogue_guest rogue_sink; do \
	  target/debug/snow-connect artefact sign target/guests/wasm32-wasip2/wasm-release/$$w.wasm --key tests/keys/development-only.key; done

## Build the host, the fake ServiceNow and the Kafka harness.
build: wasm
	$(CARGO) build -p snow-connect -p fake-snow -p kafka-harness

## Fake ServiceNow + local Kafka + a source and a sink for DEMO_SECONDS, then a summary.
demo: build
	DEMO_SECONDS=$(DEMO_SECONDS) bash tests/demo/demo.sh

## The Node host of the second-host tests (jco, preview2-shim; versions pinned in its package-lock.json).
JCO_HOST := tests/hosts/jco
$(JCO_HOST)/node_modules/.package-lock.json: $(JCO_HOST)/package-lock.json
	@bash tests/setup.sh --tests
	npm ci --prefix $(JCO_HOST) --no-audit --no-fund

## Confluent's Python client (the third-party reader and writer of registry formats), versions pinned
## in tests/python/requirements.txt, in a virtual environment of its own.
PYTHON_ENV := target/python
$(PYTHON_ENV)/.installed: tests/python/requirements.txt
	@bash tests/setup.sh --tests
	python3 -m venv $(PYTHON_ENV)
	$(PYTHON_ENV)/bin/pip install --quiet --disable-pip-version-check -r tests/python/requirements.txt
	touch $@

## The JavaScript example transform (examples/transform-js), compiled to a component with ComponentizeJS
## from the jco host's packages (the same pinned versions as its own package.json).
TRANSFORM_JS := target/transforms/transform_label.wasm
$(TRANSFORM_JS): examples/transform-js/label.js examples/transform-js/build.mjs wit/transform.wit wit/types.wit wit/host.wit $(JCO_HOST)/node_modules/.package-lock.json
	node examples/transform-js/build.mjs $@ --modules $(JCO_HOST)/node_modules

## The Kafka Connect plugin (connect-plugin/, ADR 0037): its jar, compiled against Apache Kafka Connect
## 4.1.1's jars, fetched once from Maven Central into target/connect/jars-4.1.1 (also the distributed
## worker tests/e2e/connect.rs starts). Nothing of Connect's own goes into the plugin.
CONNECT_JARS := target/connect/jars-4.1.1/.complete
CONNECT_JAR := target/connect/snow-connect-plugin.jar
CONNECT_SOURCES := $(wildcard connect-plugin/src/main/java/io/snowconnect/*.java) $(wildcard connect-plugin/src/main/resources/META-INF/services/*)
$(CONNECT_JARS): connect-plugin/pom-worker.xml
	@bash tests/setup.sh --tests
	rm -rf target/connect/jars-4.1.1
	mvn -q -B -Dstyle.color=never -f connect-plugin/pom-worker.xml dependency:copy-dependencies \
	  -DoutputDirectory=$(CURDIR)/target/connect/jars-4.1.1 -DincludeScope=runtime
	touch $@
$(CONNECT_JAR): $(CONNECT_JARS) $(CONNECT_SOURCES) connect-plugin/keys.py docs/configuration.md
	rm -rf target/connect/classes && mkdir -p target/connect/classes
	javac --release 17 -Xlint:all -Werror -d target/connect/classes -cp 'target/connect/jars-4.1.1/*' connect-plugin/src/main/java/io/snowconnect/*.java
	cp -r connect-plugin/src/main/resources/META-INF target/connect/classes/
	python3 connect-plugin/keys.py docs/configuration.md > target/connect/classes/io/snowconnect/keys.tsv
	jar --create --file $@ -C target/connect/classes .

## The plugin in Confluent Hub's layout, as Connect's plugin.path takes it: target/connect/snow-connect-servicenow-<v>/
## and .zip (the jar, this machine's release executor, the components signed with the DEVELOPMENT key and an
## operator file trusting it: for trying it out; `make release` builds the archive users install). docs/kafka-connect.md.
connect-plugin: wasm $(CONNECT_JAR)
	$(CARGO) build --release -p snow-connect
	bash connect-plugin/package.sh --binary target/release/snow-connect --components target/guests/wasm32-wasip2/wasm-release \
	  --trusted-key tests/keys/development-only.pub --version $(VERSION) --out target/connect

## The release (release/build.sh, ADR 0041, docs/releasing.md): into target/release-artefacts/ the static
## x86_64 musl binary, the reproducible signed components, the Connect archive (Confluent Hub's layout), the
## OCI image layout, CycloneDX SBOMs, checksums and the signed provenance. SNOW_RELEASE_KEY signs (default: the
## DEVELOPMENT key, for tests). Needs musl-tools (tests/setup.sh --release names what is missing).
release: $(CONNECT_JAR)
	@bash tests/setup.sh --release
	bash release/build.sh

## The release as its users use it (tests/e2e/release.rs): the static binary in an empty root moves rows, the
## Connect archive unzipped into a fresh worker's plugin.path runs a source and a sink, the image unpacked by
## umoci runs under runc, and a second build of the components elsewhere has the same digests; and wkg (built once
## from crates.io) pulls the components we push to an OCI registry and we run what it pushes. CI runs it.
release-test: release $(JCO_HOST)/node_modules/.package-lock.json $(PYTHON_ENV)/.installed $(TRANSFORM_JS)
	SNOW_RELEASE_DIR=$(CURDIR)/target/release-artefacts $(CARGO) test -p snow-connect --test e2e -- --include-ignored --test-threads=2 release:: oci::wkg_

## Cargo.lock against the RustSec advisory database, offline, from the snapshot in release/ (release/audit.sh;
## exceptions, each with its reason, in .cargo/audit.toml). cargo-audit is built once into target/tools.
audit: setup
	bash release/audit.sh

## Every test: unit, fake, harness, and end to end with real components and a real broker. The end-to-end
## tests mostly wait (on Kafka, the fake's pacing, a killed process) rather than compute, so TEST_THREADS run
## at once even on 2 cores; each test's deadlines are generous enough for a busy machine.
TEST_THREADS ?= 4
test: $(JCO_HOST)/node_modules/.package-lock.json $(PYTHON_ENV)/.installed $(TRANSFORM_JS) $(CONNECT_JAR)
	@bash tests/setup.sh --tests
	$(CARGO) build -p snow-core --target wasm32-wasip2
	$(CARGO) test -- --test-threads=$(TEST_THREADS)

## Benchmarks: the source backfill three ways, through rows hidden by ACLs, a parallel backfill at 300 ms a request, component costs, the sink's write paths, value formats, transforms, push, a 100,000-row snapshot table, the backfill inside Kafka Connect (results in docs/benchmarks.md).
bench: wasm $(TRANSFORM_JS) $(CONNECT_JAR)
	$(CARGO) build --release -p snow-connect -p fake-snow -p snow-bench
	target/release/snow-bench run --rows $(BENCH_ROWS)
	target/release/snow-bench hidden
	target/release/snow-bench backfill
	target/release/snow-bench sink
	target/release/snow-bench startup
	target/release/snow-bench swap
	target/release/snow-bench fleet
	target/release/snow-bench formats
	target/release/snow-bench transforms
	target/release/snow-bench push
	target/release/snow-bench snapshot
	target/release/snow-bench connect
	@for w in guest_source guest_sink; do target/release/snow-connect inspect target/guests/wasm32-wasip2/wasm-release/$$w.wasm --instantiations 1000; done

## The long tests at their full sizes (`make test` runs them smaller): the fleet with three workers, 50 tables
## x 10,000 rows and a sink, a worker SIGKILLed during the backfill, a fourth joining (1,000 rows a table in
## `make test`); five hot-swaps over a 200,000-row backfill (50,000) and a 20,000-record sink (10,000); a sink
## SIGKILLed four times over 20,000 records (10,000); the exactly-once tests marked ignored.
soak: $(JCO_HOST)/node_modules/.package-lock.json
	@bash tests/setup.sh --tests
	SNOW_FLEET_ROWS=10000 $(CARGO) test -p snow-connect --test e2e fleet::three_workers -- --nocapture
	SNOW_SWAP_ROWS=200000 SNOW_SWAP_RECORDS=20000 $(CARGO) test -p snow-connect --test e2e swap::a_ -- --nocapture
	SNOW_KILL_RECORDS=20000 $(CARGO) test -p snow-connect --test e2e sink_lanes::killed_at_random_points -- --nocapture
	$(CARGO) test -p snow-connect --test e2e exactly_once:: -- --ignored --nocapture

## The release's static musl binary against the glibc build: size, start and the source rate (a), in turns
## (tests/bench/src/static_build.rs; results in docs/benchmarks.md). Needs `make release` (a long build).
STATIC_BIN = target/release-artefacts/snow-connect-$(VERSION)-x86_64-linux-musl
bench-static: release wasm
	$(CARGO) build --release -p snow-connect -p fake-snow -p snow-bench
	target/release/snow-bench static --binary $(STATIC_BIN) --rows $(BENCH_ROWS)

## The composed HTTP connector under `wasmtime serve`: builds wasmtime-cli 48 once into target/tools (a long
## build, so it is not part of `make test`), then runs the tests that need it (tests/e2e/hosts.rs).
WASMTIME_CLI := target/tools/wasmtime-48.0.8/bin/wasmtime
$(WASMTIME_CLI): | setup
	$(CARGO) install wasmtime-cli --version 48.0.8 --locked --root target/tools/wasmtime-48.0.8

hosts: $(JCO_HOST)/node_modules/.package-lock.json $(WASMTIME_CLI)
	$(CARGO) test -p snow-connect --test e2e hosts:: -- --include-ignored

## Fuzzing (cargo fuzz, libFuzzer, nightly): each target of tests/fuzz runs FUZZ_SECONDS from its committed
## seeds (tests/fuzz/seeds/<target>); what it finds grows target/fuzz/corpus/<target>, a crash is kept in
## tests/fuzz/artifacts/<target> and stops the run (copy it to tests/fuzz/regressions/<target>/ once fixed:
## `make test` replays every seed and regression input through each target on stable, tests/fuzz-replay).
## cargo-fuzz is built once into target/tools.
FUZZ_SECONDS ?= 60
FUZZ_TARGETS ?= page_scanner encoded_query properties rest batch_answer sigstore_bundle component_manifest wit_records converter_input registry_and_transforms protobuf source_version push_and_deletes stored_position executor_frames guard_versions token_answers sink_resolution state_records typed_transforms
CARGO_FUZZ := target/tools/cargo-fuzz/bin/cargo-fuzz
$(CARGO_FUZZ): | setup
	rustup toolchain list | grep -q '^nightly' || rustup toolchain install nightly --profile minimal
	$(CARGO) +nightly install cargo-fuzz --locked --root target/tools/cargo-fuzz

fuzz: $(CARGO_FUZZ)
	@for t in $(FUZZ_TARGETS); do \
	  mkdir -p target/fuzz/corpus/$$t; \
	  echo "==> fuzz $$t for $(FUZZ_SECONDS) s"; \
	  PATH="$(CURDIR)/target/tools/cargo-fuzz/bin:$$PATH" $(CARGO) +nightly fuzz run --fuzz-dir tests/fuzz --sanitizer none $$t \
	    target/fuzz/corpus/$$t tests/fuzz/seeds/$$t -- -max_total_time=$(FUZZ_SECONDS) -rss_limit_mb=2048 > target/fuzz/$$t.log 2>&1; \
	  status=$$?; grep -E '^Done|panicked|SUMMARY|crash-' target/fuzz/$$t.log | tail -n 4; \
	  [ $$status = 0 ] || { echo "fuzz $$t failed: target/fuzz/$$t.log, the input in tests/fuzz/artifacts/$$t"; exit 1; }; \
	done

## A broker for local work (target/kafka/local); prints its bootstrap address.
kafka-up: setup
	$(CARGO) run -q -p kafka-harness -- up

kafka-down: setup
	$(CARGO) run -q -p kafka-harness -- down

lint: setup
	$(CARGO) fmt --all --check
	$(CARGO) clippy --all-targets -- -D warnings
	$(CARGO) clippy --target wasm32-wasip2 $(GUESTS) -p snow-core -- -D warnings

fmt:
	$(CARGO) fmt --all

clean:
	$(CARGO) clean
