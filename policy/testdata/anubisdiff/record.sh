#!/bin/sh
# record.sh records Anubis's decisions for the differential test
# (policy/anubisdiff_test.go): it copies the Anubis module at
# ANUBIS_VERSION from the module cache (go mod download fetches it), adds
# the two generated web assets its build needs as empty files (they only
# serve the challenge page's scripts, not its decisions), builds
# harness/main.go inside the copy as cmd/maatdiff, and runs it over every
# policy file of Anubis's tree and the requests of corpus.json. It writes
# anubis-$ANUBIS_VERSION.txt and, under tree/, the policy files as Anubis
# read them. Run from anywhere; it takes a few minutes the first time
# (Anubis's dependencies are downloaded by the go command).
set -eu
cd "$(dirname "$0")"
ANUBIS_VERSION=${ANUBIS_VERSION:-v1.27.0}
GO=${GO:-go}
json=$(GOFLAGS=-mod=mod "$GO" mod download -json "github.com/TecharoHQ/anubis@$ANUBIS_VERSION")
dir=$(printf '%s\n' "$json" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
[ -d "$dir" ] || { echo "record.sh: no module directory: $json" >&2; exit 1; }
work=$(mktemp -d)
trap 'chmod -R u+w "$work"; rm -rf "$work"' EXIT
cp -R "$dir" "$work/anubis"
chmod -R u+w "$work/anubis"
mkdir -p "$work/anubis/lib/challenge/preact/static" "$work/anubis/lib/challenge/proofofwork/static/js" "$work/anubis/cmd/maatdiff"
: > "$work/anubis/lib/challenge/preact/static/app.js"
: > "$work/anubis/lib/challenge/proofofwork/static/js/bootstrap.mjs"
cp harness/main.go "$work/anubis/cmd/maatdiff/main.go"
(cd "$work/anubis" && "$GO" build -o "$work/maatdiff" ./cmd/maatdiff)
rm -rf tree
"$work/maatdiff" -root "$work/anubis" -corpus "$PWD/corpus.json" -dns "$PWD/dns.json" \
	-out "$PWD/anubis-$ANUBIS_VERSION.txt" -tree "$PWD/tree"
