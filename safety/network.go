package safety

import "slices"

// networkClients are the HTTP clients of each language. Where an
// execution has a network (an egress allow list), the sandbox's proxy
// decides which hosts a program reaches, so the checker stops reporting
// them: WithNetwork. Raw sockets, ssl, processes and the rest stay as the
// policy says.
var networkClients = struct {
	python, javascript, jsGlobals, bash []string
}{
	python:     []string{"http", "urllib", "urllib3", "requests", "httpx", "aiohttp"},
	javascript: []string{"http", "https", "node-fetch", "undici", "axios", "got"},
	jsGlobals:  []string{"fetch"},
	bash:       []string{"curl", "wget"},
}

// WithNetwork returns a copy of p that lets programs use HTTP clients: in
// deny mode they leave the forbidden lists, in allow mode they join the
// allowed ones. A nil p is the default policy.
func (p *Policy) WithNetwork() *Policy {
	if p == nil {
		p = DefaultPolicy()
	}
	q := *p
	drop := func(list, names []string) []string {
		return slices.DeleteFunc(slices.Clone(list), func(s string) bool { return slices.Contains(names, s) })
	}
	add := func(list, names []string) []string {
		out := slices.Clone(list)
		for _, n := range names {
			if !slices.Contains(out, n) {
				out = append(out, n)
			}
		}
		return out
	}
	c := networkClients
	q.Python.ForbiddenModules = drop(p.Python.ForbiddenModules, c.python)
	q.Python.AllowedModules = add(p.Python.AllowedModules, c.python)
	q.JavaScript.ForbiddenModules = drop(p.JavaScript.ForbiddenModules, c.javascript)
	q.JavaScript.AllowedModules = add(p.JavaScript.AllowedModules, c.javascript)
	q.JavaScript.ForbiddenGlobals = drop(p.JavaScript.ForbiddenGlobals, c.jsGlobals)
	q.Bash.ForbiddenCommands = drop(p.Bash.ForbiddenCommands, c.bash)
	return &q
}
