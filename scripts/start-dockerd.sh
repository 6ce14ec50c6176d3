#!/usr/bin/env bash
# Starts a Docker engine when none answers, and waits (at most about 60 s)
# until `docker info` succeeds. Safe to run again: an engine that already
# answers is left alone. Tries the default storage driver first and falls
# back to vfs (slow but works everywhere, e.g. in a VM without overlay
# support). Logs go to /var/log/codeagent-dockerd.log.
set -euo pipefail
log=${DOCKERD_LOG:-/var/log/codeagent-dockerd.log}
wait_secs=${DOCKERD_WAIT:-60}

answers() { timeout 10 docker info >/dev/null 2>&1; }

if answers; then
  echo "start-dockerd: an engine already answers"
  exit 0
fi
if ! command -v dockerd >/dev/null; then
  echo "start-dockerd: dockerd is not installed (apt-get install docker.io)" >&2
  exit 1
fi
sudo=""
if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi

# start launches dockerd with extra flags in the background and waits for it.
start() {
  echo "start-dockerd: starting dockerd $*" >&2
  $sudo sh -c "nohup dockerd $* >>'$log' 2>&1 </dev/null &"
  local i
  for ((i = 0; i < wait_secs; i++)); do
    if answers; then return 0; fi
    if ! pgrep -x dockerd >/dev/null; then return 1; fi
    sleep 1
  done
  return 1
}

stop() {
  local pid
  pid=$(pgrep -x dockerd || true)
  if [ -n "$pid" ]; then
    $sudo kill $pid 2>/dev/null || true
    for _ in $(seq 1 20); do kill -0 $pid 2>/dev/null || break; sleep 0.5; done
  fi
}

# A dockerd that is running but not answering yet (started by another
# process a moment ago) gets its chance first.
if pgrep -x dockerd >/dev/null; then
  for ((i = 0; i < wait_secs; i++)); do
    if answers; then echo "start-dockerd: engine ready"; exit 0; fi
    sleep 1
  done
  echo "start-dockerd: dockerd runs but does not answer; restarting it" >&2
  stop
fi

if start || { stop; start --storage-driver=vfs; } || { stop; start --storage-driver=vfs --iptables=false --ip6tables=false; }; then
  echo "start-dockerd: engine ready ($(docker info --format '{{.ServerVersion}} {{.Driver}}'))"
  exit 0
fi
echo "start-dockerd: no engine after ${wait_secs}s; last lines of $log:" >&2
tail -n 30 "$log" >&2 || true
exit 1
