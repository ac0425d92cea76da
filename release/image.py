"""The container image as an OCI image layout, written without a container daemon (ADR 0041).

    image.py --binary FILE --components DIR --trusted-key PUB --version V --commit SHA --out DIR

DIR becomes an OCI image layout (oci-layout, index.json, blobs/sha256/...) holding one image for
linux/amd64, and DIR.tar the same layout as one file (what `skopeo copy oci-archive:` or
`podman load` read). One layer:

    /usr/local/bin/snow-connect                   the static binary (the entrypoint)
    /usr/share/snow-connect/components/           the signed components and their bundles
    /etc/snow-connect/worker.properties           the default operator file (a fleet worker)
    /etc/snow-connect/keys/<key>.pub              the key it trusts: the one that signed them
    /etc/ssl/certs/ca-certificates.crt            the build machine's CA bundle, when it has one
                                                  (librdkafka and OIDC find it; ServiceNow's
                                                  certificates are checked with the binary's own roots)
    /etc/passwd, /etc/group                       root and `snow` (65532), the user it runs as
    /home/snow (0700, snow's), /tmp (1777)

Reproducible: entries sorted, owners numeric, every mtime and the config's `created`
SOURCE_DATE_EPOCH, gzip without a name or time. The same inputs give the same digests.
"""
import argparse
import datetime
import gzip
import hashlib
import io
import json
import os
import shutil
import tarfile

USER = 65532


def tar_layer(files, epoch):
    """files: (path, bytes|None for a directory, mode, uid) -> the uncompressed tar's bytes."""
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for path, data, mode, uid in sorted(files, key=lambda f: f[0]):
            info = tarfile.TarInfo(path)
            info.mtime = epoch
            info.mode = mode
            info.uid = info.gid = uid
            info.uname = info.gname = ""
            if data is None:
                info.type = tarfile.DIRTYPE
                tar.addfile(info)
            else:
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
    return out.getvalue()


def gzipped(data):
    out = io.BytesIO()
    with gzip.GzipFile(filename="", mode="wb", fileobj=out, mtime=0, compresslevel=9) as z:
        z.write(data)
    return out.getvalue()


def canonical(value):
    return json.dumps(value, sort_keys=True, separators=(",", ":")).encode()


class Layout:
    def __init__(self, root):
        self.root = root
        os.makedirs(os.path.join(root, "blobs", "sha256"))

    def blob(self, data, media_type):
        digest = hashlib.sha256(data).hexdigest()
        with open(os.path.join(self.root, "blobs", "sha256", digest), "wb") as f:
            f.write(data)
        return {"mediaType": media_type, "digest": f"sha256:{digest}", "size": len(data)}


def read(path):
    with open(path, "rb") as f:
        return f.read()


def main():
    p = argparse.ArgumentParser()
    for flag in ("binary", "components", "trusted-key", "version", "commit", "out"):
        p.add_argument(f"--{flag}", required=True)
    a = p.parse_args()
    epoch = int(os.environ.get("SOURCE_DATE_EPOCH", "0"))
    created = datetime.datetime.fromtimestamp(epoch, datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    key_name = os.path.basename(a.trusted_key)
    components = "/usr/share/snow-connect/components"

    operator = f"""# The image's default operator file: one worker of a fleet (docs/configuration.md, "Workers: a fleet").
# Mount your own at /etc/snow-connect/worker.properties, or run a connector file instead:
#   <runtime> run <image> run /config/connector.properties
group.id=snow-connect
bootstrap.servers=kafka:9092
listeners=http://0.0.0.0:8083
plugin.path={components}
component.trusted.keys=/etc/snow-connect/keys/{key_name}
config.providers.env.allowed.names=SNOW_*
""".encode()
    passwd = f"root:x:0:0:root:/root:/sbin/nologin\nsnow:x:{USER}:{USER}:snow-connect:/home/snow:/sbin/nologin\n".encode()
    group = f"root:x:0:\nsnow:x:{USER}:\n".encode()

    files = [
        ("etc", None, 0o755, 0),
        ("etc/passwd", passwd, 0o644, 0),
        ("etc/group", group, 0o644, 0),
        ("etc/snow-connect", None, 0o755, 0),
        ("etc/snow-connect/worker.properties", operator, 0o644, 0),
        ("etc/snow-connect/keys", None, 0o755, 0),
        (f"etc/snow-connect/keys/{key_name}", read(a.trusted_key), 0o644, 0),
        ("home", None, 0o755, 0),
        ("home/snow", None, 0o700, USER),
        ("tmp", None, 0o1777, 0),
        ("usr", None, 0o755, 0),
        ("usr/local", None, 0o755, 0),
        ("usr/local/bin", None, 0o755, 0),
        ("usr/local/bin/snow-connect", read(a.binary), 0o755, 0),
        ("usr/share", None, 0o755, 0),
        ("usr/share/snow-connect", None, 0o755, 0),
        (components.lstrip("/"), None, 0o755, 0),
    ]
    for name in sorted(os.listdir(a.components)):
        if name.endswith(".wasm") or name.endswith(".sigstore.json"):
            files.append((f"{components.lstrip('/')}/{name}", read(os.path.join(a.components, name)), 0o644, 0))
    ca = "/etc/ssl/certs/ca-certificates.crt"
    if os.path.isfile(ca):
        files += [("etc/ssl", None, 0o755, 0), ("etc/ssl/certs", None, 0o755, 0), (ca.lstrip("/"), read(ca), 0o644, 0)]

    layer = tar_layer(files, epoch)
    if os.path.exists(a.out):
        shutil.rmtree(a.out)
    layout = Layout(a.out)
    layer_desc = layout.blob(gzipped(layer), "application/vnd.oci.image.layer.v1.tar+gzip")
    labels = {
        "org.opencontainers.image.title": "snow-connect",
        "org.opencontainers.image.description": "ServiceNow <-> Apache Kafka connectors as signed WebAssembly components",
        "org.opencontainers.image.version": a.version,
        "org.opencontainers.image.revision": a.commit,
        "org.opencontainers.image.created": created,
        "org.opencontainers.image.licenses": "Apache-2.0",
    }
    config = {
        "created": created,
        "architecture": "amd64",
        "os": "linux",
        "config": {
            "User": f"{USER}:{USER}",
            "Entrypoint": ["/usr/local/bin/snow-connect"],
            "Cmd": ["worker", "--config", "/etc/snow-connect/worker.properties"],
            "Env": ["PATH=/usr/local/bin", "HOME=/home/snow", "SNOW_COMPONENT_CACHE=/home/snow/.cache/snow-connect/components"],
            "WorkingDir": "/home/snow",
            "ExposedPorts": {"8083/tcp": {}},
            "Labels": labels,
        },
        "rootfs": {"type": "layers", "diff_ids": [f"sha256:{hashlib.sha256(layer).hexdigest()}"]},
        "history": [{"created": created, "created_by": "release/image.py"}],
    }
    config_desc = layout.blob(canonical(config), "application/vnd.oci.image.config.v1+json")
    manifest = {
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": config_desc,
        "layers": [layer_desc],
        "annotations": {k: v for k, v in labels.items() if k != "org.opencontainers.image.description"},
    }
    manifest_desc = layout.blob(canonical(manifest), "application/vnd.oci.image.manifest.v1+json")
    manifest_desc["annotations"] = {"org.opencontainers.image.ref.name": a.version}
    manifest_desc["platform"] = {"architecture": "amd64", "os": "linux"}
    index = {"schemaVersion": 2, "mediaType": "application/vnd.oci.image.index.v1+json", "manifests": [manifest_desc]}
    with open(os.path.join(a.out, "index.json"), "wb") as f:
        f.write(canonical(index))
    with open(os.path.join(a.out, "oci-layout"), "wb") as f:
        f.write(canonical({"imageLayoutVersion": "1.0.0"}))

    # The layout as one tar (oci-archive), as reproducible as its blobs.
    entries = []
    for top, dirs, names in os.walk(a.out):
        rel = os.path.relpath(top, a.out)
        if rel != ".":
            entries.append((rel, None, 0o755, 0))
        entries += [(os.path.normpath(os.path.join(rel, n)), read(os.path.join(top, n)), 0o644, 0) for n in names]
    with open(a.out + ".tar", "wb") as f:
        f.write(tar_layer(entries, epoch))
    print(f"image: {a.out} ({manifest_desc['digest']}), {a.out}.tar")


if __name__ == "__main__":
    main()
