package nfa

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/cepheus-cep/cepheus/event"
)

// TestEdgeIndex: runs whose every node is indexed (edgeIndexMin 1) and
// whose prunes go by hash release the same matches and timeouts, and
// encode to the same bytes after every step, as runs that scan every
// node's edges and compare each discarded partial match with each; over
// patterns of loops (nested groups among them) whose nodes hold many
// edges, some many more than the default edgeIndexMin.
func TestEdgeIndex(t *testing.T) {
	seed := envSeed()
	patterns := []struct {
		name string
		p    *Pattern
	}{
		{"anyLoop", Begin("a").Where(nameIs("a")).FollowedByAny("b").Where(nameIs("b")).OneOrMore().AllowCombinations().
			FollowedBy("c").Where(nameIs("c")).Within(30 * time.Millisecond)},
		{"anyLoopPast", Begin("a").Where(nameHas("a")).FollowedByAny("b").Where(nameHas("b")).TimesOrMore(2).AllowCombinations().
			FollowedByAny("c").Where(nameIs("c")).Within(25 * time.Millisecond).Skip(SkipPastLast())},
		{"nested", BeginGroup(
			BeginGroup(Begin("a").Where(nameHas("a")).NotFollowedBy("x").Where(nameIs("x"))).Optional().
				FollowedByAny("b").Where(nameHas("b")).TimesOrMore(1)).TimesOrMore(1).
			FollowedByGroup(BeginGroup(Begin("c").Where(nameIs("c")).FollowedBy("d").Where(nameHas("b")).Optional()).
				FollowedBy("e").Where(nameHas("a"))).OneOrMore().Within(5 * time.Millisecond)},
		{"nestedToNext", BeginGroup(Begin("a").Where(nameHas("a")).FollowedByAny("b").Where(nameHas("b")).OneOrMore()).
			TimesOrMore(1).FollowedBy("c").Where(nameIs("c")).Within(8 * time.Millisecond).Skip(SkipToNextEvent())},
	}
	names := []string{"a", "b", "ab", "bb", "c", "x"}
	defer func(m, p int) { edgeIndexMin, pruneByHash = m, p }(edgeIndexMin, pruneByHash)
	defaultMin := edgeIndexMin
	big := 0
	for pi, pt := range patterns {
		n := mustCompile(t, pt.p, WithTimeouts())
		t.Run(pt.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, uint64(pi)))
			for trial := range 3 {
				var ires, sres Result
				indexed, scanned := n.NewRun(), n.NewRun()
				var ts event.Time
				for i := range 50 {
					ts += event.Time(rng.IntN(2))
					e := ev(uint64(i+1), names[rng.IntN(len(names))], 0, ts)
					edgeIndexMin, pruneByHash = 1, 0
					got := stepOutput(t, n, indexed, e, &ires)
					gotEnc := indexed.AppendBinary(nil)
					edgeIndexMin, pruneByHash = math.MaxInt, math.MaxInt
					want := stepOutput(t, n, scanned, e, &sres)
					wantEnc := scanned.AppendBinary(nil)
					if got != want {
						t.Fatalf("seed %d trial %d event %d: %q, scanning %q", seed, trial, i+1, got, want)
					}
					if string(gotEnc) != string(wantEnc) {
						t.Fatalf("seed %d trial %d event %d: the encodings differ", seed, trial, i+1)
					}
					if scanned.edgeIdx != nil {
						t.Fatal("the scanning run has an index")
					}
					indexed.nodes.each(func(_ nodeKey, nd *node) {
						if len(nd.edges) >= defaultMin {
							big++
						}
					})
				}
			}
		})
	}
	if big == 0 {
		t.Errorf("no node reached %d edges: the test misses the nodes the index is for", defaultMin)
	}
}

// TestEdgeIndexCompatible: an index finds, in the node's order, exactly
// the edges a scan finds compatible with a version, as edges come and go;
// among versions of few digits, so that prefixes and siblings abound.
func TestEdgeIndexCompatible(t *testing.T) {
	rng := rand.New(rand.NewPCG(envSeed(), 13))
	randomDewey := func() dewey {
		ds := make([]int32, 1+rng.IntN(7))
		for i := range ds {
			ds[i] = int32(rng.IntN(3))
		}
		return deweyOf(ds)
	}
	for trial := range 50 {
		var edges []*edge
		x := &edgeIndex{byParent: map[uint64][]*edge{}}
		multi := 0
		for step := range 400 {
			if len(edges) > 0 && rng.IntN(3) == 0 {
				e := edges[rng.IntN(len(edges))]
				if e.seq >= 0 {
					x.drop(e)
				}
			} else {
				e := &edge{version: randomDewey()}
				edges = append(edges, e)
				x.add(e)
			}
			v := randomDewey()
			var want []*edge
			for _, e := range edges {
				if e.seq >= 0 && v.compatible(&e.version) {
					want = append(want, e)
				}
			}
			got := x.compatible(nil, &v, true)
			if len(want) > 1 {
				multi++
			}
			if len(got) != len(want) {
				t.Fatalf("trial %d step %d: %v finds %d edges, a scan %d", trial, step, v, len(got), len(want))
			}
			for i := range got {
				if got[i] != want[i] {
					t.Fatalf("trial %d step %d: %v: edge %d is %v, a scan's %v", trial, step, v, i, got[i].version, want[i].version)
				}
			}
		}
		if multi == 0 {
			t.Fatalf("trial %d: no version with two compatible edges", trial)
		}
	}
}
