package backendkit

import (
	"os"
	"strings"
	"testing"
)

func TestCheckHostUID(t *testing.T) {
	if err := CheckHostUID(DefaultHostUID); err != nil {
		t.Fatalf("the default host uid is taken on this host: %v", err)
	}
	if err := CheckHostUID(0); err == nil {
		t.Fatal("uid 0 accepted")
	}
	if err := CheckHostUID(65534); err == nil && fileHas("/etc/passwd", ":65534:") {
		t.Fatal("nobody's uid accepted")
	}
}

func fileHas(path, s string) bool {
	b, err := os.ReadFile(path)
	return err == nil && strings.Contains(string(b), s)
}

func TestCheckHostUIDRange(t *testing.T) {
	if err := CheckHostUIDRange(DefaultHostUID, HostUIDCount); err != nil {
		t.Fatalf("the default host uid range is taken on this host: %v", err)
	}
	if err := CheckHostUIDRange(65000, 1000); err == nil && fileHas("/etc/passwd", ":65534:") {
		t.Fatal("a range holding nobody's uid accepted")
	}
	if err := CheckHostUIDRange(1<<32-10, 100); err == nil {
		t.Fatal("a range past the last uid accepted")
	}
}
