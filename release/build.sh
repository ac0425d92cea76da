#!/usr/bin/env bash
# `make release`: every release artefact of this commit into target/release-artefacts/ (ADR 0041,
# docs/releasing.md):
#   snow-connect-<v>-x86_64-linux-musl      the static binary (nothing but the kernel needed)
#   snow-connect-<v>-aarch64-linux-musl     the same for 64-bit ARM (cross-built with Zig)
#   components/guest_{source,sink}.wasm      the components, built reproducibly, each with its
#                                            Sigstore bundle (<file>.sigstore.json)
#   snow-connect-servicenow-<v>.zip          the Kafka Connect plugin, Confluent Hub's layout
#   snow-connect-<v>-image/                  the container image, an OCI image layout (and .tar)
#   sbom/*.cdx.json                          CycloneDX SBOMs of the binary and of each component
#   SHA256SUMS, SHA512SUMS                   of every file above
#   provenance.json (+ .sigstore.json)       commit, toolchain, inputs and digests, signed
#   RELEASE-NOTES.md                         the ADRs added or changed since the last v* tag, the digests
#
# Signing key: SNOW_RELEASE_KEY (a PKCS#8 PEM private key, `snow-connect artefact keygen`) with its
# public key SNOW_RELEASE_PUB (default: the key's name with .pub). Without them the DEVELOPMENT key
# of tests/keys signs, and the provenance says so: such a release is for tests, never for users.
# SOURCE_DATE_EPOCH (default: the commit's time) stamps every date inside the artefacts, so the
# same commit and toolchain give the same bytes.
set -euo pipefail
cd "$(dirname "$0")/.."

out=${SNOW_RELEASE_OUT:-target/release-artefacts}
build=target/release-build
triple=x86_64-unknown-linux-musl
version=$(sed -n '/^\[workspace.package\]/,/^\[/s/^version = "\(.*\)"/\1/p' Cargo.toml)
commit=$(git rev-parse HEAD)
dirty=$([ -z "$(git status --porcelain --untracked-files=no)" ] && echo false || echo true)
export SOURCE_DATE_EPOCH=${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct)}
key=${SNOW_RELEASE_KEY:-tests/keys/development-only.key}
pub=${SNOW_RELEASE_PUB:-${key%.key}.pub}
development_key=$([ "$key" = tests/keys/development-only.key ] && echo true || echo false)
[ -f "$key" ] && [ -f "$pub" ] || { echo "release: signing key $key or its public key $pub is missing" >&2; exit 1; }

step() { echo "==> release: $* ($(date -u +%T))"; }

rm -rf "$out"
mkdir -p "$out/components" "$out/sbom"

# Paths inside the binaries name neither this checkout nor this machine's cargo home: two builds in
# different directories give the same bytes (release/components.sh, checked by make release-test).
source release/remap.sh

step "the static binary ($triple)"
# musl-gcc for C; librdkafka's cmake build also probes a C++ compiler, which links nothing here.
CC_x86_64_unknown_linux_musl=musl-gcc CXX_x86_64_unknown_linux_musl=g++ \
  cargo build --locked --release --target "$triple" -p snow-connect --features static \
  --target-dir "$build" --config "build.rustflags=[$remap]"
binary=$out/snow-connect-$version-x86_64-linux-musl
cp "$build/$triple/release/snow-connect" "$binary"
# Static: no program interpreter, no shared library needed (ldd: "statically linked").
bash release/static-check.sh "$binary"

step "the static binary (aarch64-unknown-linux-musl, cross-built with Zig)"
bash release/aarch64.sh "$build" "$out/snow-connect-$version-aarch64-linux-musl"

step "the components (reproducible)"
bash release/components.sh "$build/guests" "$out/components"
# The release host signs: the binary just built, with the release key.
for w in guest_source guest_sink; do
  "$binary" artefact sign "$out/components/$w.wasm" --key "$key" >/dev/null
done

step "the Kafka Connect plugin archive"
bash connect-plugin/package.sh --binary "$binary" --components "$out/components" --trusted-key "$pub" \
  --version "$version" --out "$out"
rm -rf "$out/snow-connect-servicenow-$version"  # the archive is the artefact

step "the container image (OCI image layout)"
python3 release/image.py --binary "$binary" --components "$out/components" --trusted-key "$pub" \
  --version "$version" --commit "$commit" --out "$out/snow-connect-$version-image"

step "SBOMs"
bash release/sbom.sh "$out/sbom"

step "release notes, checksums and provenance"
python3 release/notes.py --out "$out" --version "$version" --commit "$commit"
(
  cd "$out"
  files=$(find . -type f ! -name 'SHA*SUMS' ! -path './snow-connect-*-image/*' ! -name 'provenance.json*' -printf '%P\n' | LC_ALL=C sort)
  xargs -d '\n' sha256sum <<<"$files" > SHA256SUMS
  xargs -d '\n' sha512sum <<<"$files" > SHA512SUMS
)
python3 release/provenance.py --out "$out" --version "$version" --commit "$commit" --dirty "$dirty" \
  --development-key "$development_key" --public-key "$pub" --rustc "$(rustc -V)" --cargo "$(cargo -V)"
"$binary" artefact sign "$out/provenance.json" --key "$key" >/dev/null

step "done: $out"
ls -la "$out"
if [ "$development_key" = true ]; then
  echo "release: signed with the DEVELOPMENT key (tests/keys): for tests only; set SNOW_RELEASE_KEY for a real release" >&2
fi
