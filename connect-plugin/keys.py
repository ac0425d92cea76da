#!/usr/bin/env python3
"""The keys Kafka Connect shows for our connectors, from the list the host documents.

Reads docs/configuration.md and writes one line per key: `kind<TAB>key<TAB>default<TAB>meaning`,
kind being `both`, `source` or `sink` (the section the key is documented in). Keys Connect
owns (name, converters, transforms, errors.*, exactly.once.support...), keys that have no place
inside Connect (kafka.*, offset.storage.*, reporter.*, snow.push.*, snapshot mode, the plugin's signing policy)
and patterns (`snow.table.<t>.*`) are left out: a pattern's keys pass through as written and the
component checks them. Usage: keys.py docs/configuration.md > keys.tsv
"""
import re
import sys

SECTIONS = {
    "Host keys (every connector)": "both",
    "Instance keys (source and sink)": "both",
    "Reaching the instance: proxy and TLS": "both",
    "Source keys": "source",
    "Sink keys": "sink",
    "Sink host keys: concurrency, failures and reports": "sink",
}
LEFT_OUT = re.compile(
    r"^(name|tasks\.max|kafka\..*|offset\.storage\..*|reporter\..*|snow\.push\..*|errors\..*|exactly\.once\.support"
    r"|component\.(trusted\..*|bundle\.path|allow\.unsigned|digest|ref)|snow\.migrated\.from|topics(\.regex)?"
    r"|(key|value|header)\.converter.*|transforms.*|topic\.creation\..*|transaction\.boundary.*"
    r"|snow\.mode|snow\.snapshot\.interval\.ms)$"
)


def plain(text):
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)
    return text.replace("`", "").replace("\\|", "|").strip()


def main(path):
    kind = None
    seen = set()
    for line in open(path, encoding="utf-8"):
        heading = re.match(r"^#{2,3} (.*)", line)
        if heading:
            kind = SECTIONS.get(heading.group(1).strip())
            continue
        if kind is None or not line.startswith("| `"):
            continue
        cells = [c.strip() for c in re.split(r"(?<!\\)\|", line.strip())[1:-1]]
        if len(cells) < 3:
            continue
        for key in re.findall(r"`([^`]+)`", cells[0]):
            # A scoped key (`…batch.size` (scoped)) is set connector-wide as `snow.batch.size`.
            if key.startswith("…") and "(scoped)" in cells[0]:
                key = "snow." + key[1:]
            if re.search(r"[<*…= ]", key) or LEFT_OUT.match(key) or key in seen:
                continue
            seen.add(key)
            print("\t".join([kind, key, plain(cells[1]), plain(" ".join(cells[2:]))[:600]]))


if __name__ == "__main__":
    main(sys.argv[1])
