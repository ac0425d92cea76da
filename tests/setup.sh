#!/usr/bin/env bash
# What `make test`, `make demo`, `make bench` and `make lint` need on a fresh machine, in one place.
# The Makefile runs it before each of them; .ci/run runs it with --system.
#
#   bash tests/setup.sh            checks system tools (stops with one line naming the command that
#                                  installs what is missing), then installs what rustup can: the
#                                  pinned toolchain, its wasm32-wasip2 target, rustfmt and clippy.
#   bash tests/setup.sh --tests    the same, and also what `make test` needs: Node.js with npm (the
#                                  jco host) and Go 1.26+ (building cosign).
#   bash tests/setup.sh --release  the same, and also what `make release` and `make release-test`
#                                  need: musl-gcc (musl-tools), unzip, umoci and runc (the image's
#                                  test), qemu-user-static (starts the aarch64 binary), and the
#                                  x86_64- and aarch64-unknown-linux-musl targets (Zig, the aarch64
#                                  cross compiler, comes from PyPI: release/aarch64.sh).
#   bash tests/setup.sh --system   --tests, but installs missing system packages with apt-get first
#                                  (needs root: CI and fresh machines); with --release, those too.
#
# rust-toolchain.toml installs its targets only when the toolchain itself is installed; a toolchain
# that is already present without wasm32-wasip2 fails later with "can't find crate for `std`". So the
# target is checked and added here, for whatever toolchain rust-toolchain.toml pins.
# The Apache Kafka jars are fetched by the test harness on first use (tests/kafka, cached in target/).
set -euo pipefail
cd "$(dirname "$0")/.."

install_system=0
for_tests=0
for_release=0
for arg in "$@"; do
  case "$arg" in
    --system) install_system=1; for_tests=1 ;;
    --tests) for_tests=1 ;;
    --release) for_release=1; for_tests=1 ;;
  esac
done

# command -> Debian package that provides it.
declare -A package_of=(
  [cc]=build-essential [c++]=build-essential [make]=make [perl]=perl
  [java]=openjdk-17-jdk-headless [mvn]=maven [curl]=curl [node]=nodejs [npm]=npm [openssl]=openssl
  [pkg-config]=pkg-config [python3]=python3 [javac]=openjdk-17-jdk-headless [cmake]=cmake
  [musl-gcc]=musl-tools [unzip]=unzip [umoci]=umoci [runc]=runc [qemu-aarch64-static]=qemu-user-static
)
missing=()
tools=(cc c++ make perl cmake java mvn curl pkg-config)
# node and npm: the second-host tests run the components under jco in Node (tests/hosts/jco);
# openssl: the fleet tests make the REST listener's TLS certificate and the secured broker's
# certificates (curl drives the REST API).
# python3 with venv: the schema registry tests read and write records with Confluent's Python
# client, installed by `make test` into target/python (tests/python/requirements.txt).
# javac: the transform parity test compiles its harness against Kafka Connect's own transforms
# (tests/kafka/java/SmtHarness.java).
[ "$for_tests" = 1 ] && tools+=(node npm openssl python3 javac)
# The release (release/build.sh): the static binary's C compiler; its tests (tests/e2e/release.rs)
# unzip the Connect archive as a user does and run the image with an OCI tool and runtime.
# qemu-user runs the aarch64 binary on this machine's x86_64 (release-test starts it and moves rows).
[ "$for_release" = 1 ] && tools+=(musl-gcc unzip umoci runc qemu-aarch64-static)
for tool in "${tools[@]}"; do
  command -v "$tool" >/dev/null 2>&1 || missing+=("${package_of[$tool]}")
done
if [ "$for_tests" = 1 ] && command -v python3 >/dev/null 2>&1 && ! python3 -c 'import venv, ensurepip' >/dev/null 2>&1; then
  missing+=(python3-venv)
fi
# librdkafka is built with TLS and SASL against the system's OpenSSL (its headers).
if ! pkg-config --exists openssl 2>/dev/null && [ ! -f /usr/include/openssl/ssl.h ]; then
  missing+=(libssl-dev)
fi
# (libcurl, for its OAUTHBEARER/OIDC token requests, is built from the curl-sys crate's sources:
# no package. cmake builds librdkafka: Debian's cmake.)
if command -v java >/dev/null 2>&1; then
  java_major=$(java -version 2>&1 | sed -n 's/.*version "\([0-9]*\).*/\1/p' | head -n 1)
  [ "${java_major:-0}" -ge 17 ] 2>/dev/null || missing+=(openjdk-17-jdk-headless)
fi
if [ ${#missing[@]} -gt 0 ]; then
  # One package per name, in a stable order.
  mapfile -t missing < <(printf '%s\n' "${missing[@]}" | sort -u)
  if [ "$install_system" = 1 ]; then
    echo "==> apt-get install ${missing[*]}"
    apt-get update -q
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${missing[@]}"
  else
    echo "setup: missing system packages; run: sudo apt-get update && sudo apt-get install -y ${missing[*]}  (or: sudo bash tests/setup.sh --system)" >&2
    exit 1
  fi
fi

# The cosign interoperability test builds cosign from its Go module (tests/e2e/support/cosign.rs),
# and the OCI tests their registry (tests/registry, go-containerregistry): Go 1.26 or later
# (Debian's golang package is older: install Go from its release).
if [ "$for_tests" = 0 ]; then
  :
elif command -v go >/dev/null 2>&1; then
  go_minor=$(go env GOVERSION | sed -n 's/^go1\.\([0-9]*\).*/\1/p')
  if [ "${go_minor:-0}" -lt 26 ]; then
    echo "setup: Go $(go env GOVERSION) is too old for building cosign and the test registry (Go 1.26+ is needed)" >&2
    exit 1
  fi
else
  echo "setup: Go is missing; the tests build cosign and their OCI registry with it (Go 1.26+ on PATH)" >&2
  exit 1
fi

if ! command -v rustup >/dev/null 2>&1; then
  echo "setup: rustup is missing; install it from https://rustup.rs (then run make again: the toolchain installs itself)" >&2
  exit 1
fi

toolchain=$(sed -n 's/^channel *= *"\(.*\)"/\1/p' rust-toolchain.toml)
[ -n "$toolchain" ] || { echo "setup: rust-toolchain.toml names no channel" >&2; exit 1; }
if ! rustup toolchain list | grep -q "^$toolchain-"; then
  echo "==> installing Rust $toolchain (rust-toolchain.toml)"
  rustup toolchain install "$toolchain" --profile minimal
fi
if ! rustup target list --installed --toolchain "$toolchain" | grep -qx wasm32-wasip2; then
  echo "==> adding the wasm32-wasip2 target to Rust $toolchain"
  rustup target add --toolchain "$toolchain" wasm32-wasip2
fi
if [ "$for_release" = 1 ]; then
  for target in x86_64-unknown-linux-musl aarch64-unknown-linux-musl; do
    if ! rustup target list --installed --toolchain "$toolchain" | grep -qx "$target"; then
      echo "==> adding the $target target to Rust $toolchain (the release's static binaries)"
      rustup target add --toolchain "$toolchain" "$target"
    fi
  done
fi
installed=$(rustup component list --installed --toolchain "$toolchain")
for component in rustfmt clippy; do
  if ! grep -q "^$component-" <<<"$installed"; then
    echo "==> adding $component to Rust $toolchain"
    rustup component add --toolchain "$toolchain" "$component"
  fi
done
