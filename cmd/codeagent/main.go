// Command codeagent turns a task in plain language into working code, safely,
// and offers its sandbox to other programs.
package main

import (
	"context"
	"os"
)

func main() {
	ctx, stop := signalContext(context.Background()) // canceled on SIGINT or SIGTERM
	code := run(ctx, os.Args[1:], stdio{in: os.Stdin, out: os.Stdout, err: os.Stderr})
	stop()
	os.Exit(code)
}
