#!/usr/bin/env bash
# A real single-node Kubernetes cluster on this machine, for the kubernetes
# backend's tests, bound to 127.0.0.1 and needing no outside network:
#
#   scripts/kube-local.sh up     start etcd, containerd, kube-apiserver,
#                                kube-controller-manager, kube-scheduler and
#                                the kubelet; print KUBECONFIG=PATH last
#   scripts/kube-local.sh down   stop everything up started
#   scripts/kube-local.sh restart-apiserver   stop and start kube-apiserver
#                                (the backend's tests of an API server restart)
#   scripts/kube-local.sh status
#
# The Kubernetes binaries come from scripts/kube-build.sh (built from the Go
# module proxy, cached in /var/cache/codeagent); etcd, containerd, runc and
# the CNI plugins from Debian. The sandbox image (images/build-offline.sh)
# and a pause image built here from a few lines of Go are exported from the
# local Docker engine into containerd. Pods get no network at all: the CNI
# plugin written here, codeagent-none, gives them an address and no
# interface but loopback (bridge would not enforce a NetworkPolicy). The
# runtime class "codeagent" is scripts/kube-runc, codeagent.json the Docker
# backend's seccomp profile as the kubelet's Localhost profile.
#
# This host is cgroup v1: the kubelet is told failCgroupV1: false. It would
# set vm.overcommit_memory=1, kernel.panic=10 and kernel.panic_on_oops=1 for
# the whole machine; it runs in a mount namespace of its own where those
# files read as it wants, so the host's settings stay as they are.
set -Eeuo pipefail
cd "$(dirname "$0")/.."
repo=$PWD
version=${KUBE_VERSION:-v1.37.2}
state=${KUBE_LOCAL_DIR:-/var/lib/codeagent-kube}
run=${KUBE_LOCAL_RUN:-/run/codeagent-kube}
# The node is named by its address: a kubelet refuses a loopback --node-ip,
# but takes an address given as its host name for its InternalIP, which
# the API server then uses for exec.
node=127.0.0.1
# Ports of our own, so as not to meet another etcd or cluster on this host.
etcd_port=32379 api_port=36443 kubelet_port=30250
log() { echo "kube-local: $*" >&2; }
t0=$SECONDS
step() { log "$1 ($((SECONDS - t0)) s)"; }

pidfile() { echo "$run/$1.pid"; }
alive() { local p; p=$(cat "$(pidfile "$1")" 2>/dev/null) && kill -0 "$p" 2>/dev/null; }

# start NAME CMD...: runs CMD in the background, logging to $state/log/NAME.log.
start() {
  local name=$1; shift
  if alive "$name"; then return 0; fi
  setsid "$@" >>"$state/log/$name.log" 2>&1 </dev/null &
  echo $! >"$(pidfile "$name")"
}

stop() {
  local name=$1 p i
  p=$(cat "$(pidfile "$name")" 2>/dev/null) || return 0
  if kill -0 "$p" 2>/dev/null; then
    kill "$p" 2>/dev/null || true
    for i in $(seq 1 50); do kill -0 "$p" 2>/dev/null || break; sleep 0.2; done
    kill -9 "$p" 2>/dev/null || true
  fi
  rm -f "$(pidfile "$name")"
}

# wait_for WHAT SECONDS CMD...: retries CMD until it succeeds.
wait_for() {
  local what=$1 secs=$2 i; shift 2
  for ((i = 0; i < secs * 5; i++)); do
    if "$@" >/dev/null 2>&1; then return 0; fi
    sleep 0.2
  done
  log "$what did not come up in ${secs}s; last lines of its log:"
  tail -n 30 "$state/log/$what.log" >&2 || true
  return 1
}

# api METHOD PATH [JSON]: a request to the API server as the admin.
api() {
  curl -fsS --max-time 10 --cacert "$state/pki/ca.crt" -H "Authorization: Bearer $(cat "$state/pki/admin.token")" \
    -X "$1" ${3:+-H 'Content-Type: application/json' -d "$3"} "https://127.0.0.1:$api_port$2"
}
# create PATH JSON: creates an object unless it exists.
create() { api POST "$1" "$2" >/dev/null 2>&1 || api GET "$1/$(echo "$2" | sed -n 's/.*"name": *"\([^"]*\)".*/\1/p')" >/dev/null; }
node_ready() { api GET "/api/v1/nodes/$node" | tr -d ' \n' | grep -q '"type":"Ready","status":"True"'; }

certs() {
  local pki=$state/pki
  [ -f "$pki/done" ] && return 0
  mkdir -p "$pki"
  (
    cd "$pki"
    openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.crt -days 3650 -subj "/CN=codeagent-local-ca" 2>/dev/null
    openssl req -newkey rsa:2048 -nodes -keyout apiserver.key -out apiserver.csr -subj "/CN=kube-apiserver" 2>/dev/null
    printf 'subjectAltName=IP:127.0.0.1,IP:10.96.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc\n' >san.ext
    openssl x509 -req -in apiserver.csr -CA ca.crt -CAkey ca.key -CAcreateserial -out apiserver.crt -days 3650 -extfile san.ext 2>/dev/null
    openssl req -newkey rsa:2048 -nodes -keyout kubelet-client.key -out kubelet-client.csr -subj "/O=system:masters/CN=kube-apiserver-kubelet-client" 2>/dev/null
    openssl x509 -req -in kubelet-client.csr -CA ca.crt -CAkey ca.key -CAcreateserial -out kubelet-client.crt -days 3650 2>/dev/null
    openssl genrsa -out sa.key 2048 2>/dev/null
    openssl rsa -in sa.key -pubout -out sa.pub 2>/dev/null
    : >tokens.csv
    for who in admin node controller-manager scheduler; do
      tok=$(openssl rand -hex 24)
      case $who in
        admin) echo "$tok,codeagent-admin,admin,system:masters" ;;
        node) echo "$tok,system:node:$node,node,system:nodes" ;;
        controller-manager) echo "$tok,system:kube-controller-manager,controller-manager,system:masters" ;; # every controller under one identity
        scheduler) echo "$tok,system:kube-scheduler,scheduler," ;;
      esac >>tokens.csv
      echo "$tok" >"$who.token"
    done
    chmod 600 ./*.key ./*.token tokens.csv
    touch done
  )
  local who
  for who in admin node controller-manager scheduler; do
    cat >"$state/$who.kubeconfig" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: local
  cluster:
    server: https://127.0.0.1:$api_port
    certificate-authority-data: $(base64 -w0 <"$pki/ca.crt")
users:
- name: $who
  user:
    token: $(cat "$pki/$who.token")
contexts:
- name: local
  context: {cluster: local, user: $who, namespace: codeagent}
current-context: local
EOF
    chmod 600 "$state/$who.kubeconfig"
  done
}

# cni writes the CNI configuration and the codeagent-none plugin: an
# address from host-local and no interface besides the loopback that
# containerd adds.
cni() {
  mkdir -p "$state/cni/bin" "$state/cni/net.d"
  local p
  for p in /usr/lib/cni/*; do ln -sf "$p" "$state/cni/bin/"; done
  cat >"$state/cni/bin/codeagent-none" <<'EOF'
#!/usr/bin/python3
# CNI plugin: the Pod gets an address (from host-local, so that the runtime
# has one to report) and no network interface: nothing but its loopback.
import json, os, subprocess, sys
raw = sys.stdin.buffer.read()
cmd = os.environ.get("CNI_COMMAND", "")
conf = json.loads(raw or b"{}")
ver = conf.get("cniVersion", "1.0.0")
def ipam():
    path = [os.path.join(d, "host-local") for d in os.environ.get("CNI_PATH", "").split(":") if d]
    path = [p for p in path if os.path.exists(p)] or ["/usr/lib/cni/host-local"]
    r = subprocess.run([path[0]], input=raw, capture_output=True)
    if r.returncode != 0:
        sys.stdout.buffer.write(r.stdout)
        sys.exit(r.returncode)
    return json.loads(r.stdout or b"{}")
if cmd == "VERSION":
    print(json.dumps({"cniVersion": ver, "supportedVersions": ["0.3.0", "0.3.1", "0.4.0", "1.0.0"]}))
elif cmd == "ADD":
    got = ipam()
    ips = [{"address": ip["address"], "interface": 0} for ip in got.get("ips", [])]
    print(json.dumps({"cniVersion": ver, "interfaces": [{"name": os.environ.get("CNI_IFNAME", "eth0"),
          "sandbox": os.environ.get("CNI_NETNS", "")}], "ips": ips, "routes": [], "dns": {}}))
elif cmd == "DEL":
    ipam()
EOF
  chmod 755 "$state/cni/bin/codeagent-none"
  cat >"$state/cni/net.d/10-codeagent-none.conflist" <<EOF
{"cniVersion": "1.0.0", "name": "codeagent-none", "plugins": [
  {"type": "codeagent-none", "ipam": {"type": "host-local", "dataDir": "$run/cni-ipam",
   "ranges": [[{"subnet": "10.244.0.0/16"}]]}}]}
EOF
}

containerd_up() {
  mkdir -p "$state/containerd" "$run/containerd"
  cat >"$state/containerd.toml" <<EOF
version = 2
root = "$state/containerd/root"
state = "$run/containerd"
[grpc]
  address = "$run/containerd.sock"
[ttrpc]
  address = "$run/containerd.sock.ttrpc"
[debug]
  address = "$run/containerd-debug.sock"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "codeagent.local/pause:1"
  disable_apparmor = true
  restrict_oom_score_adj = true
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.codeagent]
      runtime_type = "io.containerd.runc.v2"
      pod_annotations = ["codeagent.io/*"]
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.codeagent.options]
        SystemdCgroup = false
        BinaryName = "$state/bin/kube-runc"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "$state/cni/bin"
    conf_dir = "$state/cni/net.d"
EOF
  start containerd containerd --config "$state/containerd.toml"
  wait_for containerd 30 ctr --address "$run/containerd.sock" version
}

# images puts the pause and sandbox images into containerd's k8s.io
# namespace, unless the same Docker image was imported before.
images() {
  local ctr="ctr --address $run/containerd.sock -n k8s.io"
  if ! docker image inspect codeagent.local/pause:1 >/dev/null 2>&1; then
    local d; d=$(mktemp -d)
    cat >"$d/main.go" <<'EOF'
// pause holds a Pod's namespaces: it waits for a signal and exits.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	c := make(chan os.Signal, 1)
	signal.Notify(c, syscall.SIGTERM, syscall.SIGINT)
	<-c
}
EOF
    (cd "$d" && printf 'module pause\n\ngo 1.22\n' >go.mod && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o pause . &&
      mkdir root && mv pause root/ && tar -C root -c pause | docker import -c 'ENTRYPOINT ["/pause"]' -c 'USER 65535:65535' - codeagent.local/pause:1 >/dev/null)
    rm -rf "$d"
  fi
  local img id
  for img in codeagent.local/pause:1 codeagent-sandbox:latest; do
    id=$(docker image inspect -f '{{.Id}}' "$img")
    local mark="$state/containerd/imported-$(echo "$img" | tr '/:' '__')"
    if [ "$(cat "$mark" 2>/dev/null)" = "$id" ] && $ctr images ls -q | grep -q "${img%%:*}"; then continue; fi
    log "importing $img into containerd"
    docker save "$img" | $ctr images import --no-unpack=false - >/dev/null
    echo "$id" >"$mark"
  done
}

kubelet_up() {
  local kdir=$state/kubelet
  mkdir -p "$kdir/seccomp" "$run/sysctl"
  "$state/bin/kube-runc" --print-seccomp-profile >"$kdir/seccomp/codeagent.json"
  # The kubelet's root directory is shared, so that the volumes it mounts
  # from its own mount namespace are seen by containerd.
  if ! findmnt -n "$kdir" >/dev/null 2>&1; then
    mount --bind "$kdir" "$kdir"
    mount --make-rshared "$kdir"
  fi
  echo 1 >"$run/sysctl/overcommit_memory"
  echo 10 >"$run/sysctl/panic"
  echo 1 >"$run/sysctl/panic_on_oops"
  cat >"$state/kubelet.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: 127.0.0.1
port: $kubelet_port
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: 30248
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: false}
  x509: {clientCAFile: $state/pki/ca.crt}
authorization: {mode: AlwaysAllow}
cgroupDriver: cgroupfs
failCgroupV1: false
failSwapOn: false
containerRuntimeEndpoint: unix://$run/containerd.sock
podPidsLimit: 1024
maxPods: 110
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard: {memory.available: "200Mi", nodefs.available: "2%", imagefs.available: "2%"}
syncFrequency: 10s
fileCheckFrequency: 60s
serializeImagePulls: false
makeIPTablesUtilChains: false
resolvConf: ""
EOF
  start kubelet unshare -m --propagation unchanged sh -c '
    mount --bind "$1/overcommit_memory" /proc/sys/vm/overcommit_memory &&
    mount --bind "$1/panic" /proc/sys/kernel/panic &&
    mount --bind "$1/panic_on_oops" /proc/sys/kernel/panic_on_oops &&
    shift && exec "$@"' sh "$run/sysctl" \
    "$bin/kubelet" --config "$state/kubelet.yaml" --kubeconfig "$state/node.kubeconfig" \
    --hostname-override "$node" --root-dir "$kdir" --cert-dir "$state/kubelet-pki" \
    --node-labels codeagent.io/network=none --v 1
}

apiserver_up() {
  start kube-apiserver "$bin/kube-apiserver" --etcd-servers "http://127.0.0.1:$etcd_port" \
    --bind-address 127.0.0.1 --advertise-address 127.0.0.1 --secure-port "$api_port" \
    --tls-cert-file "$state/pki/apiserver.crt" --tls-private-key-file "$state/pki/apiserver.key" \
    --client-ca-file "$state/pki/ca.crt" --token-auth-file "$state/pki/tokens.csv" \
    --authorization-mode Node,RBAC --service-cluster-ip-range 10.96.0.0/24 \
    --service-account-issuer https://kubernetes.default.svc --service-account-key-file "$state/pki/sa.pub" \
    --service-account-signing-key-file "$state/pki/sa.key" \
    --kubelet-client-certificate "$state/pki/kubelet-client.crt" --kubelet-client-key "$state/pki/kubelet-client.key" \
    --kubelet-preferred-address-types InternalIP --endpoint-reconciler-type none --allow-privileged=false --profiling=false --v 1
  wait_for kube-apiserver 120 api GET /readyz
}

# failed prints the last lines of every component's log: a cluster that
# does not come up fails loudly, with the reason on standard error.
failed() {
  local f
  log "up failed ($((SECONDS - t0)) s); the components' logs:"
  for f in "$state"/log/*.log; do
    [ -f "$f" ] || continue
    echo "----- $f (last 40 lines)" >&2
    tail -n 40 "$f" >&2
  done
  log "status:"
  status >&2
}

status() {
  local c
  for c in etcd containerd kube-apiserver kube-controller-manager kube-scheduler kubelet; do
    if alive "$c"; then echo "$c: running"; else echo "$c: stopped"; fi
  done
}

up() {
  trap failed ERR
  trap 'failed; exit 1' TERM
  mkdir -p "$state/log" "$state/bin" "$run"
  if ! timeout 20 docker info >/dev/null 2>&1; then
    log "no Docker engine answers: the sandbox image is exported from it (scripts/start-dockerd.sh; images/build-offline.sh)"
    return 1
  fi
  if ! docker image inspect codeagent-sandbox:latest >/dev/null 2>&1; then
    log "the Docker engine has no codeagent-sandbox:latest (bash images/build-offline.sh)"
    return 1
  fi
  bin=$(bash scripts/kube-build.sh | tail -n 1)
  step "binaries ready in $bin"
  go build -o "$state/bin/kube-runc" ./scripts/kube-runc
  certs
  cni
  # A fresh cluster each time: etcd's data and the kubelet's state go.
  if ! alive etcd; then rm -rf "$state/etcd"; fi
  start etcd etcd --name codeagent --data-dir "$state/etcd" \
    --listen-client-urls "http://127.0.0.1:$etcd_port" --advertise-client-urls "http://127.0.0.1:$etcd_port" \
    --listen-peer-urls http://127.0.0.1:32380 --initial-advertise-peer-urls http://127.0.0.1:32380 \
    --initial-cluster codeagent=http://127.0.0.1:32380 --quota-backend-bytes 1073741824
  containerd_up
  step "etcd and containerd started"
  images &
  local imgpid=$!
  apiserver_up
  step "kube-apiserver ready"
  start kube-controller-manager "$bin/kube-controller-manager" --kubeconfig "$state/controller-manager.kubeconfig" \
    --leader-elect=false --bind-address 127.0.0.1 --secure-port 30257 \
    --service-account-private-key-file "$state/pki/sa.key" --root-ca-file "$state/pki/ca.crt" \
    --use-service-account-credentials=false --terminated-pod-gc-threshold 50 --v 1
  start kube-scheduler "$bin/kube-scheduler" --kubeconfig "$state/scheduler.kubeconfig" \
    --leader-elect=false --bind-address 127.0.0.1 --secure-port 30259 --v 1
  if ! wait "$imgpid"; then
    log "importing the images into containerd failed"
    false
  fi
  step "images in containerd"
  kubelet_up
  wait_for kubelet 120 node_ready
  step "node ready"
  create /api/v1/namespaces '{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "codeagent"}}'
  create /apis/node.k8s.io/v1/runtimeclasses '{"apiVersion": "node.k8s.io/v1", "kind": "RuntimeClass", "metadata": {"name": "codeagent"}, "handler": "codeagent"}'
  wait_for kube-controller-manager 60 api GET /api/v1/namespaces/codeagent/serviceaccounts/default
  step "cluster ready"
  echo "KUBECONFIG=$state/admin.kubeconfig"
}

down() {
  stop kubelet
  if [ -S "$run/containerd.sock" ] && alive containerd; then
    local c
    for c in $(ctr --address "$run/containerd.sock" -n k8s.io tasks ls -q 2>/dev/null); do
      ctr --address "$run/containerd.sock" -n k8s.io tasks kill -s KILL "$c" >/dev/null 2>&1 || true
    done
    sleep 1
    for c in $(ctr --address "$run/containerd.sock" -n k8s.io containers ls -q 2>/dev/null); do
      ctr --address "$run/containerd.sock" -n k8s.io tasks delete -f "$c" >/dev/null 2>&1 || true
      ctr --address "$run/containerd.sock" -n k8s.io containers delete "$c" >/dev/null 2>&1 || true
    done
  fi
  stop kube-scheduler
  stop kube-controller-manager
  stop kube-apiserver
  stop containerd
  stop etcd
  # Volumes the kubelet left mounted, then its shared bind mount.
  local m
  for m in $(findmnt -rn -o TARGET | grep "^$state/kubelet/" | sort -r); do umount -l "$m" 2>/dev/null || true; done
  umount -l "$state/kubelet" 2>/dev/null || true
  for m in $(findmnt -rn -o TARGET | grep "^$state/containerd/\|^$run/" | sort -r); do umount -l "$m" 2>/dev/null || true; done
  rm -rf "$state/kubelet" "$run"
  log "stopped"
}

case ${1:-} in
  up) up ;;
  down) down ;;
  restart-apiserver)
    bin=$(bash scripts/kube-build.sh 2>/dev/null | tail -n 1)
    stop kube-apiserver
    sleep "${2:-0}"
    apiserver_up
    ;;
  stop-apiserver) stop kube-apiserver ;;
  start-apiserver)
    bin=$(bash scripts/kube-build.sh 2>/dev/null | tail -n 1)
    apiserver_up
    ;;
  status) status ;;
  *)
    echo "usage: $0 up|down|restart-apiserver [SECONDS]|stop-apiserver|start-apiserver|status" >&2
    exit 2
    ;;
esac
