// Package ollama holds codeagent's end-to-end tests against a real model
// server: Ollama, built from source (../shared/ollama/build.sh), serving
// tiny random-weight models of known behaviour (../shared/ollama/models.sh).
// The tests drive the real codeagent binary (run, eval, mcp, serve) and the
// real OpenAI-compatible provider; nothing in them is a fake but the models.
//
// They run when CODEAGENT_OLLAMA names the ollama binary, and are skipped
// otherwise:
//
//	CODEAGENT_OLLAMA=$(bash ../shared/ollama/build.sh) go test -count=1 ./e2e/ollama
//
// Ollama listens on a free loopback port with a private models directory
// and home, cloud features off; the suite checks at its end that Ollama's
// sockets stayed on loopback, and after stopping it that no process or port
// of the suite is left.
package ollama
