#!/usr/bin/env bash
# Builds the Kubernetes binaries that scripts/kube-local.sh runs
# (kube-apiserver, kube-controller-manager, kube-scheduler, kubelet) from the
# Go module proxy, and caches them by version in
# /var/cache/codeagent/kube-VERSION/bin, so that only the first run pays (about
# 15 minutes of CPU on 2 cores). Prints the bin directory on its last line.
# KUBE_VERSION overrides the version (v1.37.2); KUBE_CACHE the cache root.
set -euo pipefail
version=${KUBE_VERSION:-v1.37.2}
cache=${KUBE_CACHE:-/var/cache/codeagent}
dir=$cache/kube-$version
bin=$dir/bin
cmds=(kube-apiserver kube-controller-manager kube-scheduler kubelet)
have=1
for c in "${cmds[@]}"; do [ -x "$bin/$c" ] || have=0; done
if [ "$have" = 1 ]; then
  echo "kube-build: cached in $bin" >&2
  echo "$bin"
  exit 0
fi
# The staging modules (k8s.io/api, k8s.io/client-go, ...) are replaced by
# their published v0.MINOR.PATCH versions, as k8s.io/kubernetes's go.mod
# replaces them by directories of its own repository.
staging="v0.${version#v1.}"
src=$dir/src
mkdir -p "$src" "$bin"
cd "$src"
started=$SECONDS
gomod=$(go mod download -json "k8s.io/kubernetes@$version" | sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",$/\1/p')
[ -f "$gomod" ] || { echo "kube-build: no go.mod for k8s.io/kubernetes@$version" >&2; exit 1; }
goversion=$(sed -n 's/^go \([0-9.]*\)$/\1/p' "$gomod")
{
  echo "module codeagent.local/kubebuild"
  echo
  echo "go $goversion"
  echo
  echo "require k8s.io/kubernetes $version"
  echo
  echo "replace ("
  sed -n 's#^[[:space:]]*\(k8s.io/[a-z0-9-]*\) => ./staging/src/.*#\t\1 => \1 '"$staging"'#p' "$gomod"
  echo ")"
} >go.mod
{
  echo "//go:build tools"
  echo
  echo "package kubebuild"
  echo
  echo "import ("
  for c in "${cmds[@]}"; do echo "	_ \"k8s.io/kubernetes/cmd/$c/app\""; done
  echo ")"
} >tools.go
n=$(grep -c ' => k8s.io/' go.mod)
echo "kube-build: building ${cmds[*]} $version ($n staging modules at $staging); this takes a while on a small machine" >&2
GOFLAGS=-mod=mod go mod tidy -e >/dev/null 2>&1 || true
GOFLAGS=-mod=mod go mod download
major=${version#v}; major=${major%%.*}
minor=${version#v*.}; minor=${minor%%.*}
ldflags="-s -w"
for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  ldflags="$ldflags -X $p.gitVersion=$version -X $p.gitMajor=$major -X $p.gitMinor=$minor -X $p.gitTreeState=clean -X $p.buildDate=1970-01-01T00:00:00Z"
done
tmp=$(mktemp -d "$dir/out.XXXXXX")
for c in "${cmds[@]}"; do
  CGO_ENABLED=0 GOFLAGS=-mod=mod go build -trimpath -ldflags "$ldflags" -o "$tmp/$c" "k8s.io/kubernetes/cmd/$c"
  echo "kube-build: $c built ($((SECONDS - started)) s so far)" >&2
done
for c in "${cmds[@]}"; do mv "$tmp/$c" "$bin/$c"; done
rmdir "$tmp"
echo "kube-build: ${cmds[*]} built in $((SECONDS - started)) s" >&2
echo "$bin"
