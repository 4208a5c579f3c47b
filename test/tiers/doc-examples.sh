# doc-examples.sh — the request examples of README.md and docs/api.md, run as they are
# written against the tier's proxy (sourced by e2e.sh, which defines check, WORK, PROXY).
#
# Each example is taken from its fenced block by the line it starts with, its URL pointed
# at this proxy, and its reply compared with the reply the docs show next to it, job id
# included: without a clients file the job id is md5("bulkwrite.v1/" + request_id), so a
# doc whose request ids collide, or whose shown reply is not what the proxy says, fails.

# doc_block FILE PATTERN [AFTER]: the fenced block with a line that matches PATTERN (ERE),
# or, with AFTER = N, the Nth block after it
doc_block() {
    awk -v pat="$2" -v after="${3:-0}" '
        /^```/ {
            if (!inb) { inb = 1; n = 0; next }
            inb = 0
            if (!found) { for (i = 1; i <= n; i++) if (b[i] ~ pat) found = 1; if (!found) next; k = 0 }
            else k++
            if (k == after) { for (i = 1; i <= n; i++) print b[i]; exit }
            next
        }
        inb { b[++n] = $0 }' "$1"
}
doc_here() { sed "s/127\.0\.0\.1:18080/127.0.0.1:$PROXY/g"; } # the docs' proxy is the demo's
squash() { tr -d ' \n'; }

doc_examples() {
    local dir=$WORK/doc-examples
    mkdir -p "$dir"
    ln -sfn "$PWD/proto" "$dir/proto"
    # README: the first request
    doc_readme() {
        doc_block README.md '^curl .*/v1/batches -d' | doc_here >"$dir/readme.sh"
        [ -s "$dir/readme.sh" ] || { echo "README: the request example is not found"; return 1; }
        (cd "$dir" && bash readme.sh >readme.out)
        echo "got: $(cat "$dir/readme.out")"
        [ "$(squash <"$dir/readme.out")" = "$(doc_block README.md '^curl .*/v1/batches -d' 1 | squash)" ]
    }
    check "README's request gets the reply README shows" doc_readme
    # api.md: the JSON body, sent by the curl line under it
    doc_api_json() {
        doc_block docs/api.md '"request_id": "feed-2026' >"$dir/req.json"
        doc_block docs/api.md '^curl .*--data-binary @req[.]json' | doc_here >"$dir/api-json.sh"
        [ -s "$dir/req.json" ] && [ -s "$dir/api-json.sh" ] || { echo "api.md: the JSON example is not found"; return 1; }
        (cd "$dir" && bash api-json.sh >api-json.out)
        echo "got: $(cat "$dir/api-json.out")"
        [ "$(squash <"$dir/api-json.out")" = "$(doc_block docs/api.md '^curl .*--data-binary @req[.]json' 1 | squash)" ]
    }
    check "api.md's JSON request gets the reply api.md shows" doc_api_json
    # api.md: the protobuf request through protoc
    doc_api_protoc() {
        doc_block docs/api.md "^cat > req[.]txt" | doc_here >"$dir/api-protoc.sh"
        [ -s "$dir/api-protoc.sh" ] || { echo "api.md: the protoc example is not found"; return 1; }
        (cd "$dir" && bash api-protoc.sh >api-protoc.out)
        echo "got: $(cat "$dir/api-protoc.out")"
        [ "$(squash <"$dir/api-protoc.out")" = "$(doc_block docs/api.md "^cat > req[.]txt" 1 | squash)" ]
    }
    check "api.md's protobuf request (protoc) gets the reply api.md shows" doc_api_protoc
}
