"""The release's provenance: what was built, from what, with what (provenance.json).

    provenance.py --out DIR --version V --commit SHA --dirty true|false --development-key true|false
                  --public-key PUB --rustc "rustc -V" --cargo "cargo -V"

Lists every artefact in DIR (from its SHA256SUMS) with its SHA-256 and SHA-512, the SBOMs that
describe them, the commit (and whether the tree had changes not committed), the toolchain,
SOURCE_DATE_EPOCH, the build's commands and the signing key's SHA-256. `make release` then signs
the file with the release key (provenance.json.sigstore.json, a Sigstore bundle that
`snow-connect artefact verify` and `cosign verify-blob --key` check).
"""
import argparse
import datetime
import hashlib
import json
import os


def main():
    p = argparse.ArgumentParser()
    for flag in ("out", "version", "commit", "dirty", "development-key", "public-key", "rustc", "cargo"):
        p.add_argument(f"--{flag}", required=True)
    a = p.parse_args()
    epoch = int(os.environ["SOURCE_DATE_EPOCH"])
    sums = {}
    for algorithm in ("256", "512"):
        with open(os.path.join(a.out, f"SHA{algorithm}SUMS")) as f:
            for line in f:
                digest, name = line.rstrip("\n").split("  ", 1)
                sums.setdefault(name, {})[f"sha{algorithm}"] = digest
    with open(a.public_key, "rb") as f:
        key_digest = hashlib.sha256(f.read()).hexdigest()
    provenance = {
        "_type": "snow-connect release provenance v1",
        "version": a.version,
        "source": {"commit": a.commit, "uncommitted_changes": a.dirty == "true"},
        "source_date_epoch": epoch,
        "source_date": datetime.datetime.fromtimestamp(epoch, datetime.timezone.utc).isoformat(),
        "toolchain": {"rustc": a.rustc, "cargo": a.cargo},
        "build": {
            "command": "make release",
            "binary": "cargo build --locked --release --target x86_64-unknown-linux-musl -p snow-connect --features static",
            "binary_aarch64": "cargo zigbuild --locked --release --target aarch64-unknown-linux-musl -p snow-connect --features static (release/aarch64.sh)",
            "components": "cargo build --locked --target wasm32-wasip2 --profile wasm-release -p guest-source -p guest-sink (paths remapped: release/components.sh)",
        },
        "signing_key": {"sha256": key_digest, "development_only": a.development_key == "true"},
        "artefacts": [{"name": name, **digests} for name, digests in sorted(sums.items())],
        "sboms": sorted(name for name in sums if name.startswith("sbom/")),
    }
    with open(os.path.join(a.out, "provenance.json"), "w") as f:
        json.dump(provenance, f, indent=2)
        f.write("\n")


if __name__ == "__main__":
    main()
