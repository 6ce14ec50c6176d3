// Package warm is the namespace backend's warm interpreters
// (namespace.Config.WarmPython) apart from its isolation code. A Python
// program spends most of a fresh sandbox's time importing pandas, numpy and
// matplotlib and, at exit, tearing them down again; a warm interpreter is a
// sandbox set up ahead whose python3 has imported them and waits for one
// program, which then runs in it as `python3 FILE` would have run it cold.
//
// This package holds what the feature decides and keeps, not how a sandbox
// is made or confined:
//
//   - Pool: the ready interpreters, taken once each (the caller runs cold
//     rather than wait), refilled in the background, replaced when old,
//     given up after warm-ups fail in a row, and the count of warm runs;
//   - Args and the startup variables: which programs may run warm;
//   - the loader (warm.py, embedded) and what an interpreter starts with
//     (Spec, Env, Limits);
//   - the protocol with the loader: its ready line (AwaitReady) and the
//     request that hands it a program (Request, Send).
//
// The isolation code stays in package namespace (warm_linux.go,
// warmmount_linux.go, warmrun_linux.go there): starting an interpreter's
// sandbox through its launcher (bwrap, namespaces, seccomp, id maps, its
// cgroup and rlimits), attaching an execution's workspace and files into
// it, setting the execution's limits, and watching and judging the run.
// namespace supplies the Start function a Pool calls and hands this package
// the pipes of the sandboxes it made. Nothing here is a security boundary:
// a mistake here can make a program run cold, or warm with other arguments
// or environment, never outside its sandbox or its limits, which namespace
// sets whatever this package says. Nothing here touches the host (no system
// call, file, mount or process of its own) except through what namespace
// hands it.
package warm
