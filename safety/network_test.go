package safety

import (
	"context"
	"testing"
)

func TestWithNetwork(t *testing.T) {
	code := map[Language]string{
		Python:     "import requests\nprint(requests.get('https://api.example.com').text)\n",
		JavaScript: "fetch('https://api.example.com').then(r => r.text()).then(console.log)\n",
		Bash:       "curl -s https://api.example.com\n",
	}
	plain, err := New(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	net, err := New(DefaultPolicy().WithNetwork())
	if err != nil {
		t.Fatal(err)
	}
	defer net.Close()
	for l, src := range code {
		r, err := plain.Check(context.Background(), l, []byte(src))
		if err != nil || r.Safe() {
			t.Errorf("%s without a network: safe %v, %v", l, r.Safe(), err)
		}
		r, err = net.Check(context.Background(), l, []byte(src))
		if err != nil || !r.Safe() {
			t.Errorf("%s with a network: %+v, %v", l, r.Findings, err)
		}
	}
	r, _ := net.Check(context.Background(), Python, []byte("import socket\n"))
	if r.Safe() {
		t.Error("raw sockets are allowed with a network")
	}
}
