package safety

import (
	"context"
	"slices"
	"strings"
	"testing"
)

// TestPythonImports: what a program imports by itself, and when that
// cannot be known from its text.
func TestPythonImports(t *testing.T) {
	for _, c := range []struct {
		name, code string
		want       []string // nil: unknown
	}{
		{"none", "print(sum(range(10)))\n", []string{}},
		{"plain", "import json, os.path\nimport numpy as np\n", []string{"json", "numpy", "os"}},
		{"from", "from matplotlib import pyplot as plt\nfrom collections.abc import Mapping\n", []string{"collections", "matplotlib"}},
		{"in a function", "def f():\n    import pandas\n    return pandas\n", []string{"pandas"}},
		{"after a semicolon", "x = 1; import pandas\n", []string{"pandas"}},
		{"relative", "from . import helpers\nimport math\n", []string{"math"}},
		{"continued", "import json, \\\n    pandas\n", []string{"json", "pandas"}},
		{"string is not an import", "s = 'import pandas'\n", []string{}},
		{"__import__", "m = __import__('pan' + 'das')\n", nil},
		{"importlib", "import importlib\nimportlib.import_module('pandas')\n", nil},
		{"exec", "exec('import pandas')\n", nil},
		{"eval", "eval(\"__import__('pandas')\")\n", nil},
		{"syntax error", "import pandas\ndef (\n", nil},
		{"too large", "import json\n" + strings.Repeat("x = 1\n", 50000), nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, known := PythonImports(context.Background(), []byte(c.code))
			if c.want == nil {
				if known {
					t.Fatalf("known = true (%v), want unknown", got)
				}
				return
			}
			if !known || got == nil || !slices.Equal(got, c.want) {
				t.Fatalf("got %v, known %v; want %v", got, known, c.want)
			}
		})
	}
}

// BenchmarkPythonImports: the cost of the hint for a short program, paid
// by every Python execution of the API (see app.Program.Spec).
func BenchmarkPythonImports(b *testing.B) {
	code := []byte("import json\nimport math\n\ndef main():\n    data = [math.sqrt(i) for i in range(100)]\n    print(json.dumps(sum(data)))\n\nmain()\n")
	for b.Loop() {
		if _, known := PythonImports(context.Background(), code); !known {
			b.Fatal("unknown")
		}
	}
}
