package main

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// TestUnifiedDiffFarApart: two lines changed 30,000 lines apart (a ruleset
// of 1,000 rules formatted) are two hunks. The LCS table this replaced was
// bounded at 16M cells and showed the whole middle as one hunk of 60,000
// lines beyond it.
func TestUnifiedDiffFarApart(t *testing.T) {
	var a, b strings.Builder
	for i := range 30_000 {
		fmt.Fprintf(&a, "line %d\n", i)
		switch i {
		case 5:
			b.WriteString("five\n")
		case 29_995:
		default:
			fmt.Fprintf(&b, "line %d\n", i)
		}
	}
	want := `--- f
+++ f (formatted)
@@ -3,7 +3,7 @@
 line 2
 line 3
 line 4
-line 5
+five
 line 6
 line 7
 line 8
@@ -29993,7 +29993,6 @@
 line 29992
 line 29993
 line 29994
-line 29995
 line 29996
 line 29997
 line 29998
`
	if got := unifiedDiff("f", a.String(), b.String()); got != want {
		t.Errorf("unifiedDiff =\n%.2000s\nwant\n%s", got, want)
	}
}

// TestDiffLinesShortest checks diffLines on random texts against a
// longest-common-subsequence table: the script turns a into b, its line
// indexes are those of the lines it names, and it is as short as any.
func TestDiffLinesShortest(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	words := []string{"a\n", "b\n", "c\n"}
	text := func() []string {
		out := make([]string, rng.IntN(14))
		for i := range out {
			out[i] = words[rng.IntN(len(words))]
		}
		return out
	}
	for range 5000 {
		a, b := text(), text()
		ops := diffLines(a, b)
		var gotB []string
		edits := 0
		for _, op := range ops {
			switch op.kind {
			case ' ':
				if a[op.ai] != op.text || b[op.bi] != op.text {
					t.Fatalf("%q -> %q: kept line %q at %d, %d", a, b, op.text, op.ai, op.bi)
				}
				gotB = append(gotB, op.text)
			case '+':
				if b[op.bi] != op.text {
					t.Fatalf("%q -> %q: added line %q at %d", a, b, op.text, op.bi)
				}
				gotB = append(gotB, op.text)
				edits++
			case '-':
				if a[op.ai] != op.text {
					t.Fatalf("%q -> %q: removed line %q at %d", a, b, op.text, op.ai)
				}
				edits++
			}
		}
		if !slices.Equal(gotB, b) {
			t.Fatalf("%q -> %q: the script gives %q", a, b, gotB)
		}
		lcs := make([][]int, len(a)+1)
		for i := range lcs {
			lcs[i] = make([]int, len(b)+1)
		}
		for i := len(a) - 1; i >= 0; i-- {
			for j := len(b) - 1; j >= 0; j-- {
				if a[i] == b[j] {
					lcs[i][j] = lcs[i+1][j+1] + 1
				} else {
					lcs[i][j] = max(lcs[i+1][j], lcs[i][j+1])
				}
			}
		}
		if want := len(a) + len(b) - 2*lcs[0][0]; edits != want {
			t.Fatalf("%q -> %q: %d edits, want %d", a, b, edits, want)
		}
	}
}

// TestUnifiedDiffBound: 4,094 lines removed and added (2,047 lines
// changed, 10 lines apart) are 2,047 hunks; 4,096 are over the bound of
// the search, and the lines from the first change to the last are one hunk.
func TestUnifiedDiffBound(t *testing.T) {
	for _, tc := range []struct{ changed, hunks int }{{2047, 2047}, {2048, 1}} {
		var a, b strings.Builder
		for i := range 10 * tc.changed {
			fmt.Fprintf(&a, "line %d\n", i)
			if i%10 == 5 {
				fmt.Fprintf(&b, "changed %d\n", i)
			} else {
				fmt.Fprintf(&b, "line %d\n", i)
			}
		}
		d := unifiedDiff("f", a.String(), b.String())
		if got := strings.Count(d, "\n@@ "); got != tc.hunks {
			t.Errorf("%d lines changed: %d hunks, want %d", tc.changed, got, tc.hunks)
		}
		if got := strings.Count(d, "\n-line ") + strings.Count(d, "\n+changed "); tc.hunks > 1 && got != 2*tc.changed {
			t.Errorf("%d lines changed: %d lines removed and added, want %d", tc.changed, got, 2*tc.changed)
		}
	}
}
