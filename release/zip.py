"""A reproducible zip of a directory: zip.py <dir> <out.zip>.

Entries under the directory's own name, sorted, directories included; every date is
SOURCE_DATE_EPOCH (zip dates are local, 1980 or later, two-second steps: it is taken as UTC);
modes kept (0755 for executables, so `unzip` and Strimzi's unpacking give a runnable executor);
no owner, no extra fields. The same tree gives the same bytes.
"""
import os
import stat
import sys
import time
import zipfile


def main(src: str, out: str) -> None:
    epoch = max(int(os.environ.get("SOURCE_DATE_EPOCH", "315532800")), 315532800)
    date = time.gmtime(epoch)[:6]
    base = os.path.basename(os.path.normpath(src))
    entries = []
    for top, dirs, files in os.walk(src):
        rel = os.path.relpath(top, src)
        prefix = base if rel == "." else f"{base}/{rel}"
        entries.append((prefix + "/", top))
        entries.extend((f"{prefix}/{f}", os.path.join(top, f)) for f in files)
    entries.sort()
    with zipfile.ZipFile(out, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=9) as z:
        for name, path in entries:
            if os.path.islink(path):
                sys.exit(f"zip.py: {path} is a symbolic link: a plugin's files must be real files")
            info = zipfile.ZipInfo(name, date_time=date)
            info.create_system = 3  # Unix: external_attr's high half holds the mode
            if name.endswith("/"):
                info.external_attr = (stat.S_IFDIR | 0o755) << 16 | 0x10
                z.writestr(info, b"")
            else:
                mode = 0o755 if os.stat(path).st_mode & 0o111 else 0o644
                info.external_attr = (stat.S_IFREG | mode) << 16
                info.compress_type = zipfile.ZIP_DEFLATED
                with open(path, "rb") as f:
                    z.writestr(info, f.read())


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
