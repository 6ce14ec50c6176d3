#!/usr/bin/env bash
# Runs every test, including the sandbox's security suite, then a short run
# of the sandbox benchmarks. Needs the packages of scripts/install-deps.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
go mod tidy -diff   # go.mod and go.sum say what the code imports
go vet ./...
go test -count=1 -timeout 40m ./...
go test -count=1 -run XXX -bench . -benchtime 50x ./sandbox/namespace
go test -count=1 -run XXX -bench . -benchtime 20x ./sandbox/docker
