package safety

import "testing"

// TestJSMainModuleTest: Node's "am I the program?" test, require.main ===
// module (the idiom node's test runner needs: the tests require the
// program), is allowed; any other use of require.main still hides what it
// loads and is refused.
func TestJSMainModuleTest(t *testing.T) {
	c := newTestChecker(t)
	for _, code := range []string{
		"function main() { console.log(1); }\nif (require.main === module) {\n  main();\n}\n",
		"if (module == require.main) { console.log(2); }\n",
		"if (require.main !== module) { module.exports = {}; }\n",
	} {
		if r := check(t, c, JavaScript, code); !r.Safe() {
			t.Errorf("refused %q: %v", code, r.Findings)
		}
	}
	for _, code := range []string{
		"require.main.require(\"child_process\").execSync(\"id\");\n",
		"const m = require.main;\nconsole.log(m);\n",
		"if (require.main === module && require.main.require) { console.log(3); }\n",
		"console.log(require.main === other);\n",
	} {
		if r := check(t, c, JavaScript, code); !hasRule(r, RuleDynamicImport) {
			t.Errorf("allowed %q: %v", code, r.Findings)
		}
	}
}
