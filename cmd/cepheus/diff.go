package main

import (
	"fmt"
	"strings"
)

// unifiedDiff returns a unified diff (three lines of context) from a to b,
// both the text of file name; "" when they are equal. It needs no external
// tool: a longest-common-subsequence table over the lines that differ,
// after the common prefix and suffix are set aside. Over a size limit it
// shows the differing middle as one hunk.
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

// maxDiffCells bounds the LCS table.
const maxDiffCells = 16 << 20

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
	if len(ma)*len(mb) > maxDiffCells {
		for i, l := range ma {
			ops = append(ops, diffOp{'-', l, pre + i, pre})
		}
		for j, l := range mb {
			ops = append(ops, diffOp{'+', l, pre + len(ma), pre + j})
		}
	} else {
		// lcs[i][j] is the LCS length of ma[i:] and mb[j:].
		n, m := len(ma), len(mb)
		lcs := make([][]int32, n+1)
		for i := range lcs {
			lcs[i] = make([]int32, m+1)
		}
		for i := n - 1; i >= 0; i-- {
			for j := m - 1; j >= 0; j-- {
				if ma[i] == mb[j] {
					lcs[i][j] = lcs[i+1][j+1] + 1
				} else {
					lcs[i][j] = max(lcs[i+1][j], lcs[i][j+1])
				}
			}
		}
		i, j := 0, 0
		for i < n || j < m {
			switch {
			case i < n && j < m && ma[i] == mb[j]:
				ops = append(ops, diffOp{' ', ma[i], pre + i, pre + j})
				i++
				j++
			case i < n && (j == m || lcs[i+1][j] >= lcs[i][j+1]):
				// Deletions go before insertions.
				ops = append(ops, diffOp{'-', ma[i], pre + i, pre + j})
				i++
			default:
				ops = append(ops, diffOp{'+', mb[j], pre + i, pre + j})
				j++
			}
		}
	}
	for k := range suf {
		ia, ib := len(a)-suf+k, len(b)-suf+k
		ops = append(ops, diffOp{' ', a[ia], ia, ib})
	}
	return ops
}
