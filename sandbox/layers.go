package sandbox

// A Layer wraps a sandbox in one concern that every execution shares (a
// rate limit, the audit log, a queue, the egress proxy): it returns a
// Sandbox whose Run does its part and calls next's.
type Layer func(next Sandbox) Sandbox

// Layers are the layers Stack puts around a backend, one field each; a nil
// field is a layer left out.
type Layers struct {
	RateLimit Layer // package ratelimit, per session or key
	Audit     Layer // session.Audited
	Queue     Layer // app.Executions
	Egress    Layer // egress.Wrap
}

// Stack returns backend under the layers l sets. This is the one place
// that says in which order every execution, from every door, goes through
// them (the outermost first):
//
//	rate limit → audit → queue → egress → backend
//
// Why this order:
//
//   - The rate limit comes first: an execution over it waits without
//     holding a worker, or is refused before anything is recorded or
//     started.
//   - The audit record is written next, before the execution may wait
//     for a worker, so that an execution the log does not hold never
//     runs, and its wait shows in the log.
//   - The queue bounds what runs at once in the process and counts every
//     execution by its door in the metrics.
//   - The egress proxy gives a Spec with a network its allow list; a Spec
//     without one passes through, with no network at all.
//   - The backend runs the program.
//
// The layers are added when what they need is known: a process opens its
// backend with Egress (backends.Open) and puts it under its Queue once
// (app.Executions.Sandbox); each run or request then adds RateLimit and
// Audit over that (session.Start, app.StartExec). Each of them calls
// Stack with its own layers set, so that the order is written here alone,
// and a later call's layers are always outer ones.
func Stack(backend Sandbox, l Layers) Sandbox {
	sb := backend
	for _, layer := range []Layer{l.Egress, l.Queue, l.Audit, l.RateLimit} { // innermost first
		if layer != nil {
			sb = layer(sb)
		}
	}
	return sb
}
