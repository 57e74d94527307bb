package cond

import (
	"strings"
	"testing"
)

// TestNeverHolds: the conjunctions whose comparisons exclude each other
// are found, with the fewest terms that do; the others, and whatever the
// check does not read, are not.
func TestNeverHolds(t *testing.T) {
	for _, c := range []struct {
		srcs []string
		want string // the terms joined by " | ", then swapped/equal; "" for none
	}{
		{[]string{`amount > 1000 && amount < 100`}, "amount > 1000 | amount < 100 swapped"},
		{[]string{`amount > 100 && amount < 1000`}, ""},
		{[]string{`type == "auth" and country != "US" and type == "capture"`}, `type == "auth" | type == "capture" equal`},
		{[]string{`type == "auth" && type == "auth"`}, ""},
		{[]string{`type == "auth" && type != "auth"`}, `type == "auth" | type != "auth"`},
		{[]string{`type != "auth" && type != "capture"`}, ""},
		{[]string{`amount >= 5 && amount <= 5`}, ""},
		{[]string{`amount >= 5 && amount <= 5 && amount != 5`}, "amount >= 5 | amount <= 5 | amount != 5"},
		{[]string{`amount > 5 && amount <= 5`}, "amount > 5 | amount <= 5"},
		{[]string{`100 < amount && amount < 50`}, "100 < amount | amount < 50 swapped"},
		{[]string{`amount > -5 && amount < -10`}, "amount > -5 | amount < -10 swapped"},
		{[]string{`country in ["US", "CA"] && country == "FR"`}, `country in ["US", "CA"] | country == "FR"`},
		{[]string{`country in ["US", "CA"] && country in ["CA", "MX"]`}, ""},
		{[]string{`country in ["US", "CA"] && country in ["FR", "MX"]`}, `country in ["US", "CA"] | country in ["FR", "MX"]`},
		{[]string{`a.amount > 10 && b.amount < 5`}, ""},
		{[]string{`a.amount > 10 && a.amount < 5`}, "a.amount > 10 | a.amount < 5 swapped"},
		{[]string{`amount == 3 && amount > 7`}, "amount == 3 | amount > 7"},
		{[]string{`amount == 3 && amount > 1`}, ""},
		{[]string{`flag == true && flag == false`}, "flag == true | flag == false equal"},
		// Not a conjunction at the top, or not a comparison with a
		// constant: left out.
		{[]string{`amount > 1000 || amount < 100`}, ""},
		{[]string{`!(amount > 1000 && amount < 100)`}, ""},
		{[]string{`amount > limit && amount < 100`}, ""},
		{[]string{`abs(amount) > 1000 && abs(amount) < 100`}, ""},
		{[]string{`name > "m" && name < "a"`}, ""},
		// Across the where clauses of a stage (ANDed), the offset in the
		// last term's clause.
		{[]string{`amount > 1000`, `country == "US" && amount < 100`}, "amount > 1000 | amount < 100 swapped"},
	} {
		n, err := NeverHolds(c.srcs)
		if err != nil {
			t.Fatalf("NeverHolds(%q): %v", c.srcs, err)
		}
		got := ""
		if n != nil {
			got = strings.Join(n.Terms, " | ")
			if n.Swapped {
				got += " swapped"
			}
			if n.Equal {
				got += " equal"
			}
			last := n.Terms[len(n.Terms)-1]
			if src := c.srcs[n.Clause]; !strings.HasPrefix(src[n.Offset:], last) {
				t.Errorf("NeverHolds(%q): offset %d in clause %d is not that of %q", c.srcs, n.Offset, n.Clause, last)
			}
		}
		if got != c.want {
			t.Errorf("NeverHolds(%q) = %q, want %q", c.srcs, got, c.want)
		}
	}
}

// FuzzNeverHolds: any source is read without a panic, and what it finds
// is terms of the source at the offset it gives.
func FuzzNeverHolds(f *testing.F) {
	for _, s := range []string{`amount > 1000 && amount < 100`, `x in ["a", "b"] && x == "c"`, `-(a.b) < -1 and a.b > 2`, `let y = 1; y > 2 && y < 1`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, src string) {
		n, err := NeverHolds([]string{src})
		if err != nil || n == nil {
			return
		}
		if len(n.Terms) < 2 || n.Clause != 0 || n.Offset < 0 || n.Offset > len(src) {
			t.Fatalf("NeverHolds(%q) = %+v", src, n)
		}
	})
}
