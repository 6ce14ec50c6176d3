package egress_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os/exec"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/codeagent/codeagent/egress"
	"github.com/codeagent/codeagent/sandbox"
	"github.com/codeagent/codeagent/sandbox/backends"
)

// BenchmarkFromSandbox measures what a program sees: curl downloading
// 10 MiB from a server on the host's loopback directly, through the proxy
// on the host (the proxy's own cost), and from the sandbox through its
// proxy (with the sandbox's CPU share, which other sandboxes contend for);
// python downloading the same body 1 MiB a read, the same three ways; and
// python opening a new connection per small request, through the proxy
// from the sandbox and directly on the host. Each side prints one number
// per transfer (bytes/s) or connection (µs), and the medians are compared,
// which a loaded machine disturbs less than totals.
//
//	go test ./egress -run '^$' -bench FromSandbox -benchtime 1x
func BenchmarkFromSandbox(b *testing.B) {
	if _, err := exec.LookPath("curl"); err != nil {
		b.Skip("curl is not installed")
	}
	body := make([]byte, 10<<20)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/small" {
			_, _ = io.WriteString(w, "ok")
			return
		}
		w.Header().Set("Content-Length", strconv.Itoa(len(body)))
		_, _ = w.Write(body)
	})}
	go func() { _ = srv.Serve(ln) }()
	defer srv.Close()
	addr := ln.Addr().String()
	_, portText, _ := net.SplitHostPort(addr)
	sb, err := backends.Open("auto", backends.Options{})
	if err != nil {
		b.Skipf("no sandbox: %v", err)
	}
	defer sb.Close()
	nw := &sandbox.Network{Allow: []string{"big.test:" + portText}, MaxBytes: 1 << 40, Resolve: map[string]string{"big.test": addr}}

	const downloads, conns = 20, 200
	curl := func(url string) string {
		return fmt.Sprintf("for i in $(seq %d); do curl -s -o /dev/null -w '%%{speed_download}\\n' %s || exit 1; done", downloads, url)
	}
	py := func(connectTo, request string) string {
		return fmt.Sprintf("import socket, time\nfor i in range(%d):\n    t0 = time.perf_counter()\n"+
			"    s = socket.create_connection(%s)\n    s.sendall(%q.encode())\n    while s.recv(65536):\n        pass\n"+
			"    s.close()\n    print(int((time.perf_counter() - t0) * 1e6))\n", conns, connectTo, request)
	}
	// pyGet downloads the body the way a program that reads 1 MiB at a
	// time would, printing bytes/s per download.
	pyGet := func(connectTo, request string) string {
		return fmt.Sprintf("import socket, time\nfor i in range(%d):\n    t0 = time.perf_counter()\n"+
			"    s = socket.create_connection(%s)\n    s.sendall(%q.encode())\n    n = 0\n"+
			"    while True:\n        b = s.recv(1 << 20)\n        if not b:\n            break\n        n += len(b)\n"+
			"    s.close()\n    assert n > %d, n\n    print(n / (time.perf_counter() - t0))\n", downloads, connectTo, request, len(body))
	}
	inSandbox := func(cmd ...string) float64 {
		res, err := sb.Run(context.Background(), sandbox.Spec{Command: cmd, Workspace: b.TempDir(), Network: nw,
			Limits: sandbox.Limits{WallTime: 5 * time.Minute}})
		if err != nil || res.ExitCode != 0 {
			b.Fatalf("%v %s %s", err, res.Stdout, res.Stderr)
		}
		return median(b, res.Stdout)
	}
	onHost := func(cmd ...string) float64 {
		out, err := exec.Command(cmd[0], cmd[1:]...).Output()
		if err != nil {
			b.Fatalf("%v %s", err, out)
		}
		return median(b, out)
	}
	// The proxy on the host's loopback too, for curl -x on the host: the
	// proxy's own cost, without the sandbox's CPU share.
	hp, err := egress.New(egress.Config{Network: *nw})
	if err != nil {
		b.Fatal(err)
	}
	hl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	go hp.Serve(hl)
	defer hp.Close()
	// The request python sends: to the server itself, or to the proxy in
	// absolute form.
	directGet := func(path string) string {
		return "GET " + path + " HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
	}
	viaProxyGet := func(path string) string {
		return "GET http://big.test:" + portText + path + " HTTP/1.1\r\nHost: big.test:" + portText + "\r\nConnection: close\r\n\r\n"
	}
	_, hpPort, _ := net.SplitHostPort(hl.Addr().String())
	for b.Loop() {
		direct := onHost("bash", "-c", curl("http://"+addr+"/big"))
		viaProxy := onHost("bash", "-c", curl("-x http://"+hl.Addr().String()+" http://big.test:"+portText+"/big"))
		proxied := inSandbox("bash", "-c", curl("http://big.test:"+portText+"/big"))
		b.ReportMetric(direct/1e6, "direct-MB/s")
		b.ReportMetric(viaProxy/1e6, "host-proxy-MB/s")
		b.ReportMetric(viaProxy/direct, "host-ratio")
		b.ReportMetric(proxied/1e6, "sandbox-MB/s")
		b.ReportMetric(proxied/direct, "sandbox-ratio")
		pd := onHost("/usr/bin/python3", "-c", pyGet(fmt.Sprintf("('127.0.0.1', %s)", portText), directGet("/big")))
		ph := onHost("/usr/bin/python3", "-c", pyGet("('127.0.0.1', "+hpPort+")", viaProxyGet("/big")))
		pp := inSandbox("python3", "-c", pyGet("('127.0.0.1', 3128)", viaProxyGet("/big")))
		b.ReportMetric(pd/1e6, "py-direct-MB/s")
		b.ReportMetric(ph/1e6, "py-host-proxy-MB/s")
		b.ReportMetric(ph/pd, "py-host-ratio")
		b.ReportMetric(pp/1e6, "py-sandbox-MB/s")
		b.ReportMetric(pp/pd, "py-sandbox-ratio")
		cd := onHost("/usr/bin/python3", "-c", py(fmt.Sprintf("('127.0.0.1', %s)", portText), directGet("/small")))
		cp := inSandbox("python3", "-c", py("('127.0.0.1', 3128)",
			viaProxyGet("/small")))
		b.ReportMetric(cd/1000, "direct-ms/conn")
		b.ReportMetric(cp/1000, "proxy-ms/conn")
		b.ReportMetric((cp-cd)/1000, "added-ms/conn")
	}
}

// median is the median of the numbers, one a line, in out.
func median(b *testing.B, out []byte) float64 {
	var v []float64
	for _, f := range strings.Fields(string(out)) {
		x, err := strconv.ParseFloat(f, 64)
		if err != nil {
			b.Fatalf("%q: %v", f, err)
		}
		v = append(v, x)
	}
	if len(v) == 0 {
		b.Fatal("no numbers")
	}
	sort.Float64s(v)
	return v[len(v)/2]
}
