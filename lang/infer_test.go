package lang

import "testing"

// TestFromTask: the language a task names, and none when it names none or
// several.
func TestFromTask(t *testing.T) {
	for task, want := range map[string]string{
		"Write a bash script that counts the lines of every .txt file":  "bash",
		"a shell script to list the biggest files":                      "bash",
		"write run.sh that prints the date":                             "bash",
		"In JavaScript, print the first 10 primes":                      "javascript",
		"using Node.js, read data.json and print the keys":              "javascript",
		"write main.js that sums 1..100":                                "javascript",
		"Write a Python program that prints the mean of sales.csv":      "python",
		"fix report.py so that it prints the total":                     "python",
		"write a Go program that prints 6*7":                            "go",
		"Print the first 10 primes in Go.":                              "go",
		"using Golang, parse data.json":                                 "go",
		"fix main.go so that it prints the total":                       "go",
		"make `go run hello.go` print hello":                            "go",
		"go through the list in items.txt and print the even numbers":   "",
		"Go over the rows of sales.csv and sum the revenue":             "",
		"go ahead and print 42, then go to the next line":               "",
		"Go to the data folder and count the files":                     "",
		"Summarise sales.csv: revenue by region":                        "",
		"print the keys of data.json":                                   "",
		"the root node of the tree and its children":                    "",
		"convert this bash script to python":                            "",
		"a binary search in JavaScript, with tests in a python harness": "",
	} {
		l, ok := FromTask(task)
		if got := map[bool]string{true: l.Name, false: ""}[ok]; got != want {
			t.Errorf("FromTask(%q) = %q, want %q", task, got, want)
		}
	}
}
