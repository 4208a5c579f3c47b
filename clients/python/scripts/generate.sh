#!/usr/bin/env bash
# clients/python/scripts/generate.sh [--check]: generates src/bulkwrite/v1 from
# proto/bulkwrite/v1/bulkwrite.proto: the messages (bulkwrite_pb2.py, .pyi) and the Connect
# client (bulkwrite_connect.py), with the pinned generators of requirements-gen.txt. With
# --check it generates into a temporary folder and fails when the committed files differ.
set -euo pipefail
cd "$(dirname "$0")/../../.."
venv=$(clients/python/scripts/venv.sh gen clients/python/requirements-gen.txt)
out=clients/python/src
if [ "${1:-}" = --check ]; then
    out=$(mktemp -d)
    trap 'rm -rf "$out"' EXIT
fi
PATH="$PWD/$venv/bin:$PATH" "$venv/bin/python" -m grpc_tools.protoc -Iproto \
    --python_out="$out" --pyi_out="$out" \
    --connectrpc_out="$out" --connectrpc_opt=protobuf=google,io=sync \
    proto/bulkwrite/v1/bulkwrite.proto
if [ "${1:-}" = --check ]; then
    for f in bulkwrite_pb2.py bulkwrite_pb2.pyi bulkwrite_connect.py; do
        if ! diff -u "clients/python/src/bulkwrite/v1/$f" "$out/bulkwrite/v1/$f"; then
            echo "clients/python/src/bulkwrite/v1/$f differs from a fresh generation: run clients/python/scripts/generate.sh" >&2
            exit 1
        fi
    done
    echo "ok - clients/python/src/bulkwrite/v1 is what the generators make of the proto"
fi
