#!/usr/bin/env bash
# Builds the relay's container image from a release binary: deploy/Containerfile on a context holding
# the binary, the shared libraries it loads (from ldd), a passwd/group with the user relay (10001) and
# an empty /var/lib/relay owned by it. No base image is pulled: the image starts FROM scratch.
#
# usage: scripts/container-image.sh [BINARY] [TAG]
#   BINARY  a relay executable for this machine's architecture; default: the release binary
#           dist/release/relay-VERSION-linux-x64 (or -linux-arm64); if missing, that release build is
#           made in a temporary directory first
#   TAG     default relay:VERSION
#   env CONTAINER_TOOL=podman|docker (default: podman if installed, else docker)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
version=$(sed -n 's/^ *"version": *"\([^"]*\)".*/\1/p' "$root/package.json" | head -1)
case "$(uname -m)" in
  x86_64) target=linux-x64 ;;
  aarch64 | arm64) target=linux-arm64 ;;
  *) echo "relay: error: no release target for $(uname -m)" >&2; exit 1 ;;
esac
binary=${1:-$root/dist/release/relay-$version-$target}
tag=${2:-relay:$version}
tool=${CONTAINER_TOOL:-$(command -v podman >/dev/null && echo podman || echo docker)}

ctx=$(mktemp -d)
trap 'rm -rf "$ctx"' EXIT
if [ ! -x "$binary" ] && [ -z "${1:-}" ]; then
  # the release build for this machine, made aside so that dist/release and its SHA256SUMS stay as they are
  (cd "$root" && "$root/node_modules/.bin/bun" scripts/release.ts --out "$ctx/release" --target "$target")
  binary=$ctx/release/relay-$version-$target
fi
[ -x "$binary" ] || { echo "relay: error: $binary is not an executable" >&2; exit 1; }
"$binary" --version >/dev/null || { echo "relay: error: $binary does not run on this machine" >&2; exit 1; }

fs=$ctx/rootfs
mkdir -p "$fs/usr/local/bin" "$fs/etc" "$fs/tmp" "$ctx/state"
chmod 1777 "$fs/tmp"
cp "$binary" "$fs/usr/local/bin/relay"
chmod 0755 "$fs/usr/local/bin/relay"
# every library the binary loads, at the path the dynamic loader looks for it
for lib in $(ldd "$binary" | grep -o '/[^ ]*'); do
  mkdir -p "$fs$(dirname "$lib")"
  cp -L "$lib" "$fs$lib"
done
printf 'root:x:0:0:root:/root:/sbin/nologin\nrelay:x:10001:10001:relay:/var/lib/relay:/sbin/nologin\n' > "$fs/etc/passwd"
printf 'root:x:0:\nrelay:x:10001:\n' > "$fs/etc/group"
cp "$root/deploy/Containerfile" "$ctx/Containerfile"

format=()
[ "$(basename "$tool")" = podman ] && format=(--format docker) # HEALTHCHECK is kept in the docker format only
"$tool" build "${format[@]}" -t "$tag" -f "$ctx/Containerfile" "$ctx"
echo "built $tag from $binary"
