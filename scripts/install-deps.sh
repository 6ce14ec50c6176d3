#!/usr/bin/env bash
# Installs what codeagent needs on Debian or Ubuntu: bubblewrap for the
# sandbox and the certificate authorities its programs trust (the host's),
# the runtimes programs use inside it (Python, node, Go), gcc for the checker's
# tree-sitter parser, g++ to build Ollama for the end-to-end tests
# (../shared/ollama/build.sh), and for the Docker backend an engine
# (docker.io) and debootstrap to build its image offline, and for the
# kubernetes backend's local test cluster (scripts/kube-local.sh) etcd,
# containerd, runc, the CNI plugins, openssl and curl. Safe to run again.
set -euo pipefail
sudo=""
if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
pkgs=(bubblewrap ca-certificates python3 python3-pandas python3-numpy python3-matplotlib python3-pytest python3-pip python3-requests python3-coverage nodejs golang-go gcc g++ procps docker.io debootstrap chromium
  etcd-server containerd runc containernetworking-plugins openssl curl util-linux)
missing=()
for p in "${pkgs[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if [ "${#missing[@]}" -gt 0 ]; then
  $sudo apt-get update -qq
  $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
# npm installs JavaScript dependencies (docs/DEPENDENCIES.md) with the host's
# node: Debian's npm package where node came without one (NodeSource's
# nodejs has its own, and conflicts with Debian's).
if ! command -v npm >/dev/null 2>&1; then
  $sudo apt-get update -qq
  $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends npm
fi
