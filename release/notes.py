"""The release notes (RELEASE-NOTES.md): what this release is and which decisions changed since the
previous one.

    notes.py --out DIR --version V --commit SHA [--since REV]

REV defaults to the newest tag `v*` that is an ancestor of the commit (none: the whole history, a
first release). The notes list every ADR (docs/adr) added or changed between REV and the commit,
with its title and status; then the artefacts with their SHA-256 (the files SHA256SUMS will list:
the notes come first so that the sums and the signed provenance cover them) and where to read how
to verify and install them. The date is SOURCE_DATE_EPOCH's, so the same commit gives the same
notes.
"""
import argparse
import datetime
import hashlib
import os
import subprocess


def artefacts(out):
    """The files SHA256SUMS will list (the image layout is listed as its tar), sorted."""
    names = []
    for root, dirs, files in os.walk(out):
        dirs[:] = [d for d in dirs if not (root == out and d.endswith("-image"))]
        for f in files:
            name = os.path.relpath(os.path.join(root, f), out)
            if not (name.startswith("SHA") and name.endswith("SUMS")) and not name.startswith("provenance.json") and name != "RELEASE-NOTES.md":
                names.append(name)
    return sorted(names)


def git(*args):
    return subprocess.run(["git", *args], check=True, capture_output=True, text=True).stdout


def main():
    p = argparse.ArgumentParser()
    for flag in ("out", "version", "commit"):
        p.add_argument(f"--{flag}", required=True)
    p.add_argument("--since")
    a = p.parse_args()
    since = a.since
    if since is None:
        tags = [t for t in git("tag", "--merged", a.commit, "--list", "v*", "--sort=-creatordate").split() if t]
        since = tags[0] if tags else None
    span = f"{since}..{a.commit}" if since else a.commit
    changed = sorted({
        path for path in git("log", "--format=", "--name-only", span, "--", "docs/adr").split()
        if path.startswith("docs/adr/0") and path.endswith(".md")
    })
    date = datetime.datetime.fromtimestamp(int(os.environ["SOURCE_DATE_EPOCH"]), datetime.timezone.utc)
    lines = [
        f"# snow-connect {a.version}",
        "",
        f"Commit {a.commit}, {date.strftime('%Y-%m-%d')}"
        + (f"; changes since {since}." if since else "; the first release: every decision so far."),
        "",
        "## Decisions added or changed (docs/adr)",
        "",
    ]
    for path in changed:
        if not os.path.exists(path):
            lines.append(f"* `{os.path.basename(path)}`: removed")
            continue
        with open(path) as f:
            text = f.read().splitlines()
        title = next((l.lstrip("# ").strip() for l in text if l.startswith("# ")), os.path.basename(path))
        start = next((i for i, l in enumerate(text) if l.startswith("Status:")), None)
        status = ""
        if start is not None:
            paragraph = []
            for l in text[start:]:
                if not l.strip():
                    break
                paragraph.append(l.strip())
            status = " " + " ".join(paragraph)
        lines.append(f"* **{title}** (`{path}`).{status}")
    if not changed:
        lines.append("None.")
    lines += ["", "## Artefacts (SHA-256)", ""]
    for name in artefacts(a.out):
        with open(os.path.join(a.out, name), "rb") as f:
            lines.append(f"* `{name}` `{hashlib.sha256(f.read()).hexdigest()}`")
    lines += [
        "",
        "Verify with `sha256sum --check SHA256SUMS` and the signed provenance; install as the README's",
        "\"Install\" section and docs/releasing.md say.",
        "",
    ]
    with open(os.path.join(a.out, "RELEASE-NOTES.md"), "w") as f:
        f.write("\n".join(lines))


if __name__ == "__main__":
    main()
