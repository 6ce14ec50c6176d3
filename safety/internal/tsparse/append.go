package tsparse

// AppendTree appends the top-level nodes of part to the tree in dst, as
// further children of dst's root, and returns the grown slice. part is the
// tree of a source that starts at byte off of the source dst was parsed from,
// so its offsets are shifted by off; its root is dropped and dst's root is
// extended to end where part's root ends.
//
// When a source is cut at the start of top-level statements, parsing the
// pieces separately and appending their trees in order gives the nodes, in
// the same pre-order, that parsing the whole source gives (the caller must
// check that no piece has an ERROR or MISSING node, see HasError).
func AppendTree(dst, part []Node, off uint32) []Node {
	if len(dst) == 0 {
		return dst
	}
	if len(part) <= 1 {
		if len(part) == 1 && part[0].End+off > dst[0].End {
			dst[0].End = part[0].End + off
		}
		return dst
	}
	last := int32(-1)
	for c := dst[0].FirstChild; c >= 0; c = dst[c].NextSibling {
		last = c
	}
	// part[j] for j >= 1 lands at dst[base+j]; parent 0 (the root) stays 0.
	base := int32(len(dst)) - 1
	dst = append(dst, part[1:]...)
	added := dst[base+1:]
	for k := range added {
		n := &added[k]
		n.Start += off
		n.End += off
		if n.Parent > 0 {
			n.Parent += base
		}
		if n.FirstChild >= 0 {
			n.FirstChild += base
		}
		if n.NextSibling >= 0 {
			n.NextSibling += base
		}
	}
	first := part[0].FirstChild + base
	if last >= 0 {
		dst[last].NextSibling = first
	} else {
		dst[0].FirstChild = first
		dst[0].Start = part[0].Start + off
	}
	dst[0].End = part[0].End + off
	return dst
}

// HasError reports whether nodes contain an ERROR or a MISSING node.
func HasError(nodes []Node) bool {
	for i := range nodes {
		if nodes[i].Kind == ErrorKind || nodes[i].Flags&Missing != 0 {
			return true
		}
	}
	return false
}
