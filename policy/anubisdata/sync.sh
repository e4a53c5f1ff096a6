#!/bin/sh
# sync.sh copies Anubis's embedded policy tree, data/ of the module
# github.com/TecharoHQ/anubis at ANUBIS_VERSION, into policy/anubisdata/data,
# with Anubis's LICENSE, and records where it came from in SOURCE. It is
# what `make anubis-data` runs; run it from the root of the repository.
#
# The module is fetched by the go command from the module proxy (go mod
# download: nothing else is downloaded, and Anubis does not become a
# dependency of the edge). The copy is byte for byte: the same file names
# (policy files import them as (data)/…), the same rules.
set -eu

ANUBIS_VERSION=${ANUBIS_VERSION:-v1.27.0}
GO=${GO:-go}
MODULE=github.com/TecharoHQ/anubis
DEST=policy/anubisdata

[ -f "$DEST/sync.sh" ] || { echo "sync.sh: run from the root of the repository" >&2; exit 2; }

json=$(GOFLAGS=-mod=mod "$GO" mod download -json "$MODULE@$ANUBIS_VERSION")
field() { printf '%s\n' "$json" | sed -n "s/^[[:space:]]*\"$1\": \"\(.*\)\",\{0,1\}\$/\1/p" | head -n 1; }
dir=$(field Dir)
sum=$(field Sum)
hash=$(field Hash)
err=$(field Error)
if [ -n "$err" ] || [ -z "$dir" ] || [ ! -d "$dir/data" ]; then
	echo "sync.sh: go mod download $MODULE@$ANUBIS_VERSION: ${err:-no data/ directory in $dir}" >&2
	exit 1
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/data"
# Everything Anubis embeds (data/embed.go): botPolicies.yaml and the
# snippet directories. Go sources and tests of data/ are not policy.
(cd "$dir/data" && find . -type f \( -name '*.yaml' -o -name '*.yml' -o -name '*.json' \) | sort) > "$tmp/files"
while IFS= read -r f; do
	mkdir -p "$tmp/data/$(dirname "$f")"
	cp "$dir/data/$f" "$tmp/data/$f"
done < "$tmp/files"
chmod -R u+w,a+r "$tmp/data"

rm -rf "$DEST/data"
mv "$tmp/data" "$DEST/data"
cp "$dir/LICENSE" "$DEST/LICENSE"
chmod u+w,a+r "$DEST/LICENSE"
count=$(wc -l < "$tmp/files" | tr -d ' ')
cat > "$DEST/SOURCE" <<EOF
# Anubis's policy tree, copied by policy/anubisdata/sync.sh (make anubis-data).
module: $MODULE
version: $ANUBIS_VERSION
commit: ${hash:-unknown}
sum: $sum
files: $count
copied: $(date -u +%Y-%m-%d)
license: MIT (LICENSE, Copyright (c) 2025 Xe Iaso)
EOF
echo "policy/anubisdata: $count files of $MODULE@$ANUBIS_VERSION (${hash:-unknown})"
