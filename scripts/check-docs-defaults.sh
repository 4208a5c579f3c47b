#!/usr/bin/env bash
# scripts/check-docs-defaults.sh [BWCTL] — the defaults README.md and docs/*.md claim for
# configuration keys, compared with the key table's (`bwctl config-doc`). `make docs-check`
# runs it; it exits 1 naming each claim that differs.
#
# A claim is a key's full name in backticks followed, within the same clause (no backtick,
# period or semicolon between), by one of:
#   `kafka.replication_factor` (default 3)        `mysql.user_host` (default `%`)
#   `proxy.produce_timeout_ms` (31 s by default)  `consumer.array_binding`, on by default
#   `kafka.jobs_topic` defaults to `bulkwrite.jobs`
# The value is read with its unit where the key's name gives one (_ms: ms, s, min, hour,
# day; _bytes: B, KB, KiB, MB, MiB, GB, GiB), "1,000" as 1000, on/off and yes/no as
# booleans. A claim whose value it cannot read is listed as skipped, never passed as
# right. Other phrasings ("256 MiB per shard by default, `proxy.backlog_max_bytes`") are
# not looked for. docs/configuration.md is generated from the table and not read.
set -euo pipefail
cd "$(dirname "$0")/.."
BWCTL=${1:-bin/bwctl}
"$BWCTL" config-doc >/dev/null || { echo "check-docs-defaults: $BWCTL config-doc failed" >&2; exit 2; }
exec python3 - "$BWCTL" README.md docs/*.md <<'PY'
import re, subprocess, sys

bwctl, files = sys.argv[1], [f for f in sys.argv[2:] if not f.endswith("docs/configuration.md")]

# key -> default as the table writes it ("3", "\"info\"", "[]", "**required**")
defaults = {}
for line in subprocess.run([bwctl, "config-doc"], capture_output=True, text=True, check=True).stdout.splitlines():
    m = re.match(r"\| `([^`]+)` \| [^|]* \| ([^|]*) \|", line)
    if m:
        defaults[m.group(1)] = m.group(2).strip()

MS = {"ms": 1, "s": 1000, "sec": 1000, "second": 1000, "min": 60000, "minute": 60000, "h": 3600000,
      "hour": 3600000, "day": 86400000, "week": 604800000}
BYTES = {"b": 1, "byte": 1, "kb": 1e3, "kib": 1024, "mb": 1e6, "mib": 1 << 20, "gb": 1e9, "gib": 1 << 30}
WORDS = {"on": "true", "yes": "true", "true": "true", "off": "false", "no": "false", "false": "false"}


def number(text):
    try:
        return float(text.replace(",", ""))
    except ValueError:
        return None


def read_claim(key, text):
    """The claimed value as the table would write it: a float, a word, a string; None if unreadable."""
    t = text.strip().strip("`").strip()
    if t.lower() in WORDS:
        return WORDS[t.lower()]
    m = re.fullmatch(r"(-?[\d,]*\.?\d+)\s*([A-Za-z]*)", t)
    if m:
        n, unit = number(m.group(1)), m.group(2).lower()
        if unit not in MS and unit not in BYTES and unit.endswith("s"):
            unit = unit[:-1]  # hours, days, bytes
        if n is None:
            return None
        if not unit:
            return n
        if key.endswith("_ms") and unit in MS:
            return n * MS[unit]
        if key.endswith("_s") and unit in MS:
            return n * MS[unit] / 1000
        if key.endswith("_bytes") and unit in BYTES:
            return n * BYTES[unit]
        return None
    if len(t) >= 2 and t[0] == t[-1] == '"':
        return t[1:-1]
    return t if re.fullmatch(r"[\w.%:/@-]*", t) else None


def table_value(default):
    d = default.strip()
    if d in WORDS:
        return WORDS[d]
    n = number(d)
    if n is not None:
        return n
    return d[1:-1] if len(d) >= 2 and d[0] == d[-1] == '"' else d


def same(a, b):
    if isinstance(a, float) and isinstance(b, float):
        return abs(a - b) <= 1e-9 * max(1.0, abs(a), abs(b))
    return a == b


VALUE = r"(`[^`]*`|[^,;)`]+?)"
PATTERNS = [  # after the key, within its clause
    re.compile(r"^[^.;`]{0,40}?\bdefault:?,?\s+(?:is\s+)?" + VALUE + r"\s*(?=[,;)]|\.(?:\s|$)|$)"),
    re.compile(r"^[^.;`]{0,40}?\bdefaults to\s+" + VALUE + r"\s*(?=[,;)]|\.(?:\s|$)|$)"),
    re.compile(r"^[^.;`]{0,40}?[(,]\s*" + VALUE + r"\s+by default\b"),
]
checked = wrong = 0
skipped = []
for path in files:
    for lineno, line in enumerate(open(path, encoding="utf-8"), 1):
        for km in re.finditer(r"`([a-z_]+(?:\.[a-z_\[\]]+)+)`", line):
            key = km.group(1)
            if key not in defaults:
                continue
            rest = line[km.end():]
            for p in PATTERNS:
                m = p.match(rest)
                if not m:
                    continue
                claim, where = m.group(1).strip(), "%s:%d" % (path, lineno)
                value = read_claim(key, claim)
                if value is None:
                    skipped.append("%s: %s: cannot read \"%s\"" % (where, key, claim))
                    break
                checked += 1
                if not same(value, table_value(defaults[key])):
                    wrong += 1
                    print("%s: %s: the text says the default is \"%s\"; the key table's is %s (bwctl config-doc)"
                          % (where, key, claim, defaults[key]))
                break
for s in skipped:
    print("skipped: " + s)
print("docs defaults: %d claims checked against bwctl config-doc, %d wrong, %d skipped" % (checked, wrong, len(skipped)))
sys.exit(1 if wrong else 0)
PY
