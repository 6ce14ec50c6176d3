// Package repocheck holds tests over the repository's own files: rules
// that no compiler or linter enforces and whose breach is silent.
package repocheck
