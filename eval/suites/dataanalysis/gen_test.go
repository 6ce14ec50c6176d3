package dataanalysis

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"testing"
)

var update = flag.Bool("update", false, "rewrite data/ from the generator")

// The committed inputs are what the generator makes; regenerate them with
// go test ./eval/suites/dataanalysis -run TestDataMatchesGenerator -update.
func TestDataMatchesGenerator(t *testing.T) {
	for name, want := range Generate() {
		p := filepath.Join("data", name)
		if *update {
			if err := os.WriteFile(p, want, 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		got, err := os.ReadFile(p)
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("%s differs from the generator's output (%v); run with -update", p, err)
		}
	}
}
