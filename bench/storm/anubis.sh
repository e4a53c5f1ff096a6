#!/bin/sh
# Builds Anubis from its Go module into bin/anubis, for make storm
# ANUBIS=bin/anubis. See the Makefile's storm-anubis target.
set -eu
GO=${GO:-go}
ANUBIS_VERSION=${ANUBIS_VERSION:-v1.27.0}
mod=github.com/TecharoHQ/anubis
dir=$(cd "$(mktemp -d)" && pwd)
trap 'rm -rf "$dir"' EXIT
src=$("$GO" mod download -json "$mod@$ANUBIS_VERSION" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
[ -n "$src" ] || { echo "storm-anubis: $mod@$ANUBIS_VERSION not downloaded" >&2; exit 1; }
cp -r "$src/." "$dir/"
chmod -R u+w "$dir"
# The bundles npm makes upstream, embedded by these packages.
mkdir -p "$dir/lib/challenge/proofofwork/static/js" "$dir/lib/challenge/preact/static"
[ -e "$dir/lib/challenge/proofofwork/static/js/bootstrap.mjs" ] || echo '// stand-in: built without npm' > "$dir/lib/challenge/proofofwork/static/js/bootstrap.mjs"
[ -e "$dir/lib/challenge/preact/static/app.js" ] || echo '// stand-in: built without npm' > "$dir/lib/challenge/preact/static/app.js"
out=$(pwd)/bin/anubis
mkdir -p bin
(cd "$dir" && GOFLAGS=-mod=mod "$GO" build -o "$out" ./cmd/anubis)
echo "built $out ($mod $ANUBIS_VERSION)"
