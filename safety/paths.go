package safety

import "strings"

// pathOutside explains why a path (or the known prefix of one, when exact is
// false) leaves the workspace, or returns "" when it does not. allowed holds
// absolute paths allowed anyway; entries ending in "/" allow a subtree.
func pathOutside(p string, exact bool, allowed []string) string {
	if p == "" {
		return ""
	}
	switch {
	case p[0] == '/' || p[0] == '\\':
		for _, a := range allowed {
			if strings.HasSuffix(a, "/") {
				if strings.HasPrefix(p, a) {
					return ""
				}
			} else if exact && p == a {
				return ""
			}
		}
		if hasDotDot(p) {
			return "it climbs out with .."
		}
		return "it is an absolute path"
	case p[0] == '~':
		return "it names a home directory"
	case len(p) >= 3 && isASCIILetter(p[0]) && p[1] == ':' && (p[2] == '\\' || p[2] == '/'):
		return "it is an absolute path"
	case strings.HasPrefix(p, "file:"):
		return "it is a file URL"
	case hasDotDot(p):
		return "it climbs out of the workspace with .."
	}
	return ""
}

func isASCIILetter(b byte) bool { return b|0x20 >= 'a' && b|0x20 <= 'z' }

// hasDotDot reports whether a path has a ".." component.
func hasDotDot(p string) bool {
	for len(p) > 0 {
		i := strings.IndexAny(p, `/\`)
		seg := p
		if i >= 0 {
			seg, p = p[:i], p[i+1:]
		} else {
			p = ""
		}
		if seg == ".." {
			return true
		}
	}
	return false
}

const pathHint = "use a relative path inside the workspace, such as \"data.csv\" or \"out/result.json\""
