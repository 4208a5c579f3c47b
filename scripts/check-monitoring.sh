#!/usr/bin/env bash
# scripts/check-monitoring.sh — the shipped monitoring, checked (make docs-check): the
# Prometheus rules parse and pass their unit tests (promtool test rules), every query of
# the Grafana dashboard parses as PromQL, and every bulkwrite metric either names is one
# the daemons export (docs/api.md's metric table, generated from their metric rows).
set -euo pipefail
cd "$(dirname "$0")/.."
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT

promtool check rules monitoring/bulkwrite.rules.yml >/dev/null
promtool test rules monitoring/bulkwrite.rules.test.yml >"$WORK/test.out" 2>&1 || { cat "$WORK/test.out"; exit 1; }

# each dashboard query as a recording rule: promtool parses it ($__rate_interval is Grafana's)
{
    echo "groups:"
    echo "  - name: dashboard"
    echo "    rules:"
    jq -r '.panels[].targets[].expr' monitoring/grafana-dashboard.json | sed 's/\$__rate_interval/5m/g' |
        awk '{ gsub(/\x27/, "\x27\x27"); printf "      - record: bulkwrite:dashboard:%d\n        expr: \x27%s\x27\n", NR, $0 }'
} >"$WORK/dashboard.rules.yml"
[ "$(grep -c 'record:' "$WORK/dashboard.rules.yml")" -gt 0 ] || { echo "the dashboard has no query"; exit 1; }
promtool check rules "$WORK/dashboard.rules.yml" >"$WORK/check.out" 2>&1 || { cat "$WORK/check.out"; exit 1; }

# every metric they name exists
grep -o '^| `bulkwrite_[a-z_]*' docs/api.md | sed 's/^| `//' | sort -u >"$WORK/exported"
grep -ho 'bulkwrite_[a-z_]*' monitoring/bulkwrite.rules.yml monitoring/grafana-dashboard.json |
    sed -E 's/_(bucket|sum|count)$//' | grep -v '^bulkwrite_$' | sort -u >"$WORK/named"
missing=$(comm -23 "$WORK/named" "$WORK/exported")
[ -z "$missing" ] || { echo "monitoring/ names metrics no daemon exports: $missing"; exit 1; }
echo "monitoring: $(grep -c 'alert:' monitoring/bulkwrite.rules.yml) rules tested, $(grep -c 'record:' "$WORK/dashboard.rules.yml") dashboard queries parsed, $(wc -l <"$WORK/named") metrics named, all exported"
