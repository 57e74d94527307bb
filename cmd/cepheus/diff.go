package main

import (
	"fmt"
	"slices"
	"strings"
)

// unifiedDiff returns a unified diff (three lines of context) from a to b,
// both the text of file name; "" when they are equal. It needs no external
// tool: a shortest edit script ([diffLines]). Over 4,095 lines removed and
// added it shows the differing middle as one hunk.
func unifiedDiff(name, a, b string) string {
	if a == b {
		return ""
	}
	x, y := splitLines(a), splitLines(b)
	ops := diffLines(x, y)
	var out strings.Builder
	fmt.Fprintf(&out, "--- %s\n+++ %s (formatted)\n", name, name)
	const context = 3
	// Walk the edit script, cutting it into hunks of changes with context.
	i := 0
	for i < len(ops) {
		if ops[i].kind == ' ' {
			i++
			continue
		}
		start := max(i-context, 0)
		end := i
		for end < len(ops) {
			if ops[end].kind != ' ' {
				end++
				continue
			}
			// A run of equal lines longer than twice the context ends the hunk.
			run := end
			for run < len(ops) && ops[run].kind == ' ' {
				run++
			}
			if run == len(ops) || run-end > 2*context {
				end = min(end+context, len(ops))
				break
			}
			end = run
		}
		h := ops[start:end]
		aStart, bStart := h[0].ai, h[0].bi
		var aLen, bLen int
		for _, op := range h {
			if op.kind != '+' {
				aLen++
			}
			if op.kind != '-' {
				bLen++
			}
		}
		fmt.Fprintf(&out, "@@ -%s +%s @@\n", hunkRange(aStart, aLen), hunkRange(bStart, bLen))
		for _, op := range h {
			out.WriteByte(op.kind)
			out.WriteString(op.text)
			if !strings.HasSuffix(op.text, "\n") {
				out.WriteString("\n\\ No newline at end of file\n")
			}
		}
		i = end
	}
	return out.String()
}

func hunkRange(start, n int) string {
	if n == 0 {
		return fmt.Sprintf("%d,0", start)
	}
	if n == 1 {
		return fmt.Sprint(start + 1)
	}
	return fmt.Sprintf("%d,%d", start+1, n)
}

// splitLines splits s into lines, each with its "\n" (the last may lack
// it).
func splitLines(s string) []string {
	var out []string
	for l := range strings.Lines(s) {
		out = append(out, l)
	}
	return out
}

// diffOp is one line of an edit script: ' ' kept, '-' removed from a, '+'
// added from b; ai and bi are the line indexes in a and b before it.
type diffOp struct {
	kind   byte
	text   string
	ai, bi int
}

// maxDiffCells bounds the memory of the edit script's search: Myers'
// algorithm keeps 2d+1 cells for each edit d of the shortest script, so
// (D+1)^2 for D edits; over it (D > 4095) the differing middle is shown as
// one hunk.
const maxDiffCells = 16 << 20

// diffLines returns a shortest edit script from a to b (deletions before
// insertions in each run of changes), by Myers' O((N+M)D) algorithm after
// the common prefix and suffix are set aside. It costs time and memory in
// the number of edits D, not in the product of the lengths: a few lines
// changed far apart in a file of 30,000 lines (a ruleset of 1,000 rules) are
// a few hunks. Before 2026-12-06 an LCS table over the middle between the
// first and the last change was bounded at 16M cells, and beyond (two
// changes more than about 4,000 lines apart) the whole middle was one hunk.
func diffLines(a, b []string) []diffOp {
	pre := 0
	for pre < len(a) && pre < len(b) && a[pre] == b[pre] {
		pre++
	}
	suf := 0
	for suf < len(a)-pre && suf < len(b)-pre && a[len(a)-1-suf] == b[len(b)-1-suf] {
		suf++
	}
	var ops []diffOp
	for i := range pre {
		ops = append(ops, diffOp{' ', a[i], i, i})
	}
	ma, mb := a[pre:len(a)-suf], b[pre:len(b)-suf]
	mid, ok := myers(ma, mb, pre)
	if !ok {
		mid = mid[:0]
		for i, l := range ma {
			mid = append(mid, diffOp{'-', l, pre + i, pre})
		}
		for j, l := range mb {
			mid = append(mid, diffOp{'+', l, pre + len(ma), pre + j})
		}
	}
	ops = append(ops, mid...)
	for k := range suf {
		ia, ib := len(a)-suf+k, len(b)-suf+k
		ops = append(ops, diffOp{' ', a[ia], ia, ib})
	}
	return ops
}

// myers returns a shortest edit script from a to b, their line indexes
// offset by off, or false when it takes more edits than maxDiffCells
// allows. For each number of edits d it keeps the furthest reach in a of
// each diagonal k = x - y (v), and the v of every d for the walk back.
func myers(a, b []string, off int) ([]diffOp, bool) {
	n, m := len(a), len(b)
	var trace [][]int32 // trace[d][k+d]: the reach of diagonal k after d edits
	prev := []int32{0}  // the reach after d-1 edits, diagonals -(d-1)..d-1
	found := -1
	for d := 0; d <= n+m && found < 0; d++ {
		if (d+1)*(d+1) > maxDiffCells {
			return nil, false
		}
		v := make([]int32, 2*d+1)
		for k := -d; k <= d; k += 2 {
			// at reads prev at diagonal k; prev spans -(d-1)..d-1.
			at := func(k int) int32 { return prev[k+d-1] }
			var x int
			switch {
			case d == 0:
				x = 0
			case k == -d || k != d && at(k-1) < at(k+1):
				x = int(at(k + 1)) // down: an insertion
			default:
				x = int(at(k-1)) + 1 // right: a deletion
			}
			y := x - k
			for x < n && y < m && a[x] == b[y] {
				x, y = x+1, y+1
			}
			v[k+d] = int32(x)
			if x >= n && y >= m {
				found = d
			}
		}
		trace = append(trace, v)
		prev = v
	}
	// Walk back from (n, m), collecting the script in reverse.
	var rev []diffOp
	x, y := n, m
	for d := found; d > 0; d-- {
		at := func(k int) int { return int(trace[d-1][k+d-1]) }
		k := x - y
		var pk int
		if k == -d || k != d && at(k-1) < at(k+1) {
			pk = k + 1
		} else {
			pk = k - 1
		}
		// The edit leads from (px, px-pk) to (sx, sx-k), then the equal
		// lines of the diagonal to (x, y).
		px := at(pk)
		sx := px
		if pk == k-1 {
			sx++
		}
		for x > sx {
			x, y = x-1, y-1
			rev = append(rev, diffOp{' ', a[x], off + x, off + y})
		}
		if pk == k+1 {
			y--
			rev = append(rev, diffOp{'+', b[y], off + x, off + y})
		} else {
			x--
			rev = append(rev, diffOp{'-', a[x], off + x, off + y})
		}
	}
	for x > 0 {
		x, y = x-1, y-1
		rev = append(rev, diffOp{' ', a[x], off + x, off + y})
	}
	slices.Reverse(rev)
	return rev, true
}
