// Package dataanalysis is codeagent's own evaluation suite: data-analysis
// tasks on CSV and JSON inputs generated here (deterministically, see
// Generate), each with a pytest acceptance test that checks the files the
// program writes. The reference solutions live in testdata and are never
// shown to the model.
package dataanalysis

import (
	"embed"

	"github.com/codeagent/codeagent/eval"
)

// FS holds the task file, the inputs and the acceptance tests.
//
//go:embed tasks.jsonl data/* tests/*
var FS embed.FS

// TasksFile is the task file's name in FS.
const TasksFile = "tasks.jsonl"

// Name is how `codeagent eval --tasks builtin:dataanalysis` calls the suite.
const Name = "dataanalysis"

// Load returns the suite.
func Load() (*eval.Suite, error) {
	s, err := eval.Load(FS, TasksFile)
	if err != nil {
		return nil, err
	}
	s.Name = Name
	return s, nil
}
