// Package backendkit holds helpers that only sandbox implementations (the
// namespace, Docker and Kubernetes backends) use: the verdict on how an
// execution ended, the checked Run around a backend's execute, the
// resolution of a workspace before it is mounted, and the range of host
// ids programs run as. It lies below the contract in package sandbox
// (Sandbox, Spec, Limits, Result, Status), which callers use and which
// never imports it.
package backendkit
