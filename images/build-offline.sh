#!/usr/bin/env bash
# Builds the Docker backend's image, codeagent-sandbox:latest, without any
# container registry: debootstrap a minimal Debian bookworm from the host's
# apt mirror, install the runtimes (Python, node, Go) into it, add the sandbox user (uid 1000),
# and `docker import` the tree. The result is equivalent to images/Dockerfile.
#
# Cached: the image carries a label with a hash of this script, and the build
# is skipped when an image with the same hash exists. The root tree is built
# under /var/cache/codeagent (never in the repository) and removed after the
# import. Bounded: the whole build is killed after BUILD_TIMEOUT seconds.
#
#   bash images/build-offline.sh [--force]
set -euo pipefail
self=$(readlink -f "$0")
cd "$(dirname "$self")"
image=${CODEAGENT_IMAGE:-codeagent-sandbox:latest}
cache=${CODEAGENT_IMAGE_CACHE:-/var/cache/codeagent}
timeout_secs=${BUILD_TIMEOUT:-1800}
packages="python3 python3-pandas python3-numpy python3-matplotlib python3-pytest python3-pip python3-requests python3-coverage curl nodejs npm golang-go"
hash=$(sha256sum build-offline.sh | cut -c1-16)

if [ "${1:-}" != "--force" ] && [ "${_CODEAGENT_INNER:-}" = "" ]; then
  have=$(docker image inspect -f '{{index .Config.Labels "io.codeagent.image-hash"}}' "$image" 2>/dev/null || true)
  if [ "$have" = "$hash" ]; then
    echo "build-offline: $image is up to date ($hash)"
    exit 0
  fi
fi
if [ "${_CODEAGENT_INNER:-}" = "" ]; then
  # Re-run under a time bound; the inner run does the work.
  exec env _CODEAGENT_INNER=1 timeout --kill-after=30 "$timeout_secs" bash "$self" "$@"
fi
if [ "$(id -u)" -ne 0 ]; then
  echo "build-offline: debootstrap and chroot need root" >&2
  exit 1
fi
for tool in debootstrap docker; do
  command -v "$tool" >/dev/null || { echo "build-offline: $tool is missing (scripts/install-deps.sh)" >&2; exit 1; }
done

# mirror prints the first Debian mirror of the host's apt sources whose path
# ends in $1 (debian or debian-security), in one-line or deb822 format.
mirror() {
  cat /etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources 2>/dev/null |
    grep -v '^[[:space:]]*#' | grep -oE "https?://[^ ]+/$1/?( |$)" | head -n1 | tr -d ' ' || true
}
main_mirror=$(mirror debian)
main_mirror=${main_mirror:-http://deb.debian.org/debian}
security_mirror=$(mirror debian-security)

root="$cache/rootfs-$hash"
mkdir -p "$cache"
cleanup() {
  for m in proc dev/pts dev sys; do
    mountpoint -q "$root/$m" 2>/dev/null && umount -l "$root/$m" || true
  done
  rm -rf "$root"
}
trap cleanup EXIT
cleanup

start=$(date +%s)
echo "build-offline: debootstrap bookworm from $main_mirror into $root"
debootstrap --variant=minbase bookworm "$root" "$main_mirror" >"$cache/debootstrap.log" 2>&1 ||
  { tail -n 30 "$cache/debootstrap.log" >&2; exit 1; }

{
  echo "deb $main_mirror bookworm main"
  echo "deb $main_mirror bookworm-updates main"
  if [ -n "$security_mirror" ]; then echo "deb $security_mirror bookworm-security main"; fi
} >"$root/etc/apt/sources.list"
cp /etc/resolv.conf "$root/etc/resolv.conf"
printf '#!/bin/sh\nexit 101\n' >"$root/usr/sbin/policy-rc.d"
chmod +x "$root/usr/sbin/policy-rc.d"
mount -t proc proc "$root/proc"

in_root() { chroot "$root" env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin DEBIAN_FRONTEND=noninteractive LANG=C.UTF-8 "$@"; }
echo "build-offline: installing $packages"
in_root apt-get update -qq
in_root apt-get install -y -qq --no-install-recommends $packages >"$cache/apt.log" 2>&1 ||
  { tail -n 30 "$cache/apt.log" >&2; exit 1; }
in_root python3 -c 'import pandas, numpy, matplotlib, pytest'
in_root node -e 'process.exit(0)'
in_root go version
in_root useradd --uid 1000 --user-group --home-dir /tmp --no-create-home --shell /bin/bash sandbox
mkdir -p "$root/workspace" "$root/code"
rmdir "$root/home" "$root/mnt" "$root/media" "$root/srv" "$root/opt" 2>/dev/null || true
chown 1000:1000 "$root/workspace"

# Slim down: package caches and lists, docs, and what only a booted system uses.
in_root apt-get clean
umount "$root/proc"
rm -rf "$root"/var/lib/apt/lists/* "$root"/var/cache/apt/*.bin "$root"/usr/share/doc/* \
  "$root"/usr/share/man/* "$root"/usr/share/info/* "$root"/var/log/* "$root/usr/sbin/policy-rc.d"
: >"$root/etc/resolv.conf"

echo "build-offline: importing $image"
tar -C "$root" --numeric-owner -c . | docker import \
  --change 'USER 1000:1000' \
  --change 'WORKDIR /workspace' \
  --change 'ENV PATH=/usr/local/bin:/usr/bin:/bin LANG=C.UTF-8 HOME=/tmp' \
  --change 'CMD ["sleep", "infinity"]' \
  --change "LABEL io.codeagent.image-hash=$hash" \
  --change 'LABEL org.opencontainers.image.title=codeagent-sandbox' \
  - "$image" >/dev/null
echo "build-offline: built $image ($hash) in $(($(date +%s) - start))s, $(docker image inspect -f '{{.Size}}' "$image" | awk '{printf "%.0f MB", $1/1e6}')"
