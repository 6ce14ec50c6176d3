package main

import (
	"os"
	"testing"
)

// TestMain keeps every test's sessions and audit log out of the real data
// directory.
func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "codeagent-test-data-")
	if err != nil {
		panic(err)
	}
	os.Setenv("XDG_DATA_HOME", dir)
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}
