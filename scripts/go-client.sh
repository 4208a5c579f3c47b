#!/usr/bin/env bash
# go-client.sh generate|check|test|build OUT — the Go client (clients/go, docs/clients.md).
#   generate   regenerates clients/go/bulkwritev1 (protoc-gen-go) and its bulkwritev1connect
#              (protoc-gen-connect-go) from proto/bulkwrite/v1/bulkwrite.proto with Debian's
#              protoc; the plugins are built at the versions clients/go/go.mod pins (its
#              `tool` lines: the same google.golang.org/protobuf and connectrpc.com/connect
#              the client runs with)
#   check      fails when the committed generated code differs from a fresh generation
#   test       check, go vet and the unit tests (go test)
#   build OUT  builds bwgo (clients/go/cmd/bwgo) to OUT, for test/tiers/client-go.sh
# Modules come from the Go module proxy into build/go (GOMODCACHE), so a fresh machine
# and CI fetch them here; nothing is written outside the source tree.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
GO=${GO:-$(command -v go || echo /usr/local/go/bin/go)}
export GOPATH=$root/build/go GOMODCACHE=$root/build/go/pkg/mod GOCACHE=$root/build/go/cache
export GOBIN=$root/build/go/bin GOTOOLCHAIN=local GOFLAGS="-modcacherw -buildvcs=false"
module=github.com/bulkwrite/bulkwrite/clients/go

generate() { # generate OUT: the generated packages under OUT
    (cd clients/go && "$GO" install tool)
    mkdir -p "$1"
    protoc -I proto --plugin=protoc-gen-go="$GOBIN/protoc-gen-go" \
        --plugin=protoc-gen-connect-go="$GOBIN/protoc-gen-connect-go" \
        --go_out="$1" --go_opt=module=$module --connect-go_out="$1" --connect-go_opt=module=$module \
        proto/bulkwrite/v1/bulkwrite.proto
}

check() {
    local fresh=$root/build/go/gen-check
    rm -rf "$fresh"
    generate "$fresh"
    diff -r clients/go/bulkwritev1 "$fresh/bulkwritev1" ||
        { echo "clients/go/bulkwritev1 differs from a fresh generation: run 'make client-go-gen'"; return 1; }
}

case ${1:-} in
generate) rm -rf clients/go/bulkwritev1 && generate clients/go ;;
check) check ;;
test)
    check
    cd clients/go
    "$GO" vet ./...
    "$GO" test -count=1 ./...
    ;;
build) cd clients/go && "$GO" build -o "$2" ./cmd/bwgo ;;
*) echo "usage: $0 generate|check|test|build OUT" >&2; exit 2 ;;
esac
