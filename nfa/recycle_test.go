package nfa

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/cepheus-cep/cepheus/event"
)

// TestRecycling: runs of several keys that share one Result, and so reuse
// each other's buffer nodes, events, edges and computations, release the
// same matches and timeouts, and encode to the same bytes after every
// step, as runs that reuse nothing. The patterns take long runs of events
// (versions longer than deweyInline digits).
func TestRecycling(t *testing.T) {
	seed := envSeed()
	rng := rand.New(rand.NewPCG(seed, 11))
	patterns := map[string]*Pattern{
		"anyLoop": Begin("a").Where(nameIs("a")).FollowedByAny("b").Where(nameIs("b")).OneOrMore().AllowCombinations().
			FollowedBy("c").Where(nameIs("c")).Within(20 * time.Millisecond),
		"longLoop": Begin("a").Where(nameIs("a")).FollowedBy("b").Where(nameHas("b")).TimesOrMore(3).
			FollowedBy("c").Where(nameIs("c")).Within(60 * time.Millisecond).Skip(SkipToNextEvent()),
		"notAtEnd": Begin("a").Where(nameIs("a")).FollowedBy("b").Where(nameIs("b")).
			NotFollowedBy("c").Where(nameIs("c")).Within(7 * time.Millisecond).Skip(SkipPastLast()),
		"group": BeginGroup(Begin("a").Where(nameIs("a")).Next("b").Where(nameIs("b"))).TimesRange(1, 2).
			FollowedBy("c").Where(nameIs("c")),
	}
	names := []string{"a", "b", "bb", "c", "x"}
	const keys = 4
	var longVersions int
	for pname, p := range patterns {
		n := mustCompile(t, p, WithTimeouts())
		t.Run(pname, func(t *testing.T) {
			for trial := range 10 {
				var shared Result
				var own [keys]Result
				var reused, fresh [keys]*Run
				for k := range keys {
					reused[k], fresh[k] = n.NewRun(), n.NewRun()
				}
				step := func(r *Run, e *event.Event, res *Result) string { return stepOutput(t, n, r, e, res) }
				ts := [keys]event.Time{}
				for i := range 200 {
					k := rng.IntN(keys)
					ts[k] += event.Time(rng.IntN(3))
					e := ev(uint64(i+1), names[rng.IntN(len(names))], 0, ts[k])
					recycle = true
					got, gotEnc := step(reused[k], e, &shared), reused[k].AppendBinary(nil)
					recycle = false
					want, wantEnc := step(fresh[k], e, &own[k]), fresh[k].AppendBinary(nil)
					recycle = true
					if got != want {
						t.Fatalf("seed %d trial %d event %d key %d: %q, without reuse %q", seed, trial, i+1, k, got, want)
					}
					if string(gotEnc) != string(wantEnc) {
						t.Fatalf("seed %d trial %d event %d key %d: the encodings differ", seed, trial, i+1, k)
					}
					for _, c := range reused[k].partial.q {
						if c.version.len() > deweyInline {
							longVersions++
						}
					}
				}
			}
		})
	}
	if longVersions == 0 {
		t.Errorf("no version longer than %d digits: the test misses the long form", deweyInline)
	}
}

// TestStaleNodeRef: a reference to a node that left the buffer stays
// stale when the node is reused, is skipped by lockNode and releaseNode,
// and encodes as nil, as the reference to a node never reused did.
func TestStaleNodeRef(t *testing.T) {
	n := mustCompile(t, Begin("a").Where(nameIs("a")).FollowedBy("b").Where(nameIs("b")))
	r := n.NewRun()
	var res Result
	r.use(&res)
	v := newDewey(1)
	first := r.put(0, r.registerEvent(ev(1, "a", 0, 1), 1), nodeRef{}, &v)
	if !first.live() || first.removed() || first.isNil() {
		t.Fatalf("a new node: live %v removed %v nil %v", first.live(), first.removed(), first.isNil())
	}
	// Nothing locks the node (no computation holds it): the first release
	// removes it, as Flink's Lockable does.
	r.releaseNode(first, &v)
	if first.live() || !first.removed() {
		t.Fatal("a released node is still live")
	}
	second := r.put(1, r.registerEvent(ev(2, "b", 0, 2), 2), first, &v)
	if second.n != first.n {
		t.Fatal("the free list did not hand the node back")
	}
	if first.live() || !first.removed() || !second.live() {
		t.Fatal("the reused node revived the stale reference")
	}
	if e := second.n.edges[0]; !e.target.removed() {
		t.Fatal("the edge to the released node is not stale")
	}
	refs := second.n.refs
	r.lockNode(first, &v)
	r.releaseNode(first, &v)
	if second.n.refs != refs || !second.live() {
		t.Fatal("a stale reference locked or released the node that reuses its pointer")
	}
	// The stale edge encodes as a nil target (0), as before reuse existed.
	c := &computation{state: n.states[n.start], version: v, prev: first}
	r.partial.offer(c)
	d, _, err := n.DecodeRun(r.AppendBinary(nil))
	if err != nil {
		t.Fatal(err)
	}
	d.nodes.each(func(_ nodeKey, nd *node) {
		for _, e := range nd.edges {
			if !e.target.isNil() {
				t.Fatal("a stale edge decoded to a node")
			}
		}
	})
	for _, c := range d.partial.q {
		if !c.prev.isNil() {
			t.Fatal("a stale computation reference decoded to a node")
		}
	}
}

// TestRunEncodingPinned: the runs of three keys sharing one Result, over a
// fixed stream and four patterns, encode after every step to exactly the
// bytes the code before the free lists and inline versions wrote
// (e8ecfa8): checkpoints of either restore in the other. The hash covers,
// per step, the pattern, step, key, match and timeout counts and the run's
// encoding in hex, one line each. A deliberate change of the format bumps
// runEncodingVersion and this hash together.
func TestRunEncodingPinned(t *testing.T) {
	const want = "921999e4792cb8d8afe59cd6702b166827a03a58205ad8d42517847ab3c48086"
	rng := rand.New(rand.NewPCG(5, 9))
	patterns := []*Pattern{
		Begin("a").Where(nameIs("a")).FollowedByAny("b").Where(nameIs("b")).OneOrMore().AllowCombinations().
			FollowedBy("c").Where(nameIs("c")).Within(20 * time.Millisecond),
		Begin("a").Where(nameIs("a")).FollowedBy("b").Where(nameHas("b")).TimesOrMore(3).
			FollowedBy("c").Where(nameIs("c")).Within(60 * time.Millisecond).Skip(SkipToNextEvent()),
		Begin("a").Where(nameIs("a")).FollowedBy("b").Where(nameIs("b")).
			NotFollowedBy("c").Where(nameIs("c")).Within(7 * time.Millisecond).Skip(SkipPastLast()),
		BeginGroup(Begin("a").Where(nameIs("a")).Next("b").Where(nameIs("b"))).TimesRange(1, 2).
			FollowedBy("c").Where(nameIs("c")),
	}
	names := []string{"a", "b", "bb", "c", "x"}
	h := sha256.New()
	for pi, p := range patterns {
		n := mustCompile(t, p, WithTimeouts())
		var res Result
		runs := [3]*Run{n.NewRun(), n.NewRun(), n.NewRun()}
		ts := [3]event.Time{}
		for i := range 300 {
			k := rng.IntN(3)
			ts[k] += event.Time(rng.IntN(3))
			e := ev(uint64(i+1), names[rng.IntN(len(names))], 0, ts[k])
			res.Reset()
			if err := runs[k].AdvanceTime(e.Time, &res); err != nil {
				t.Fatal(err)
			}
			if err := runs[k].Process(e, e.Time, &res); err != nil {
				t.Fatal(err)
			}
			fmt.Fprintf(h, "%d %d %d m%d t%d %s\n", pi, i, k, len(res.Matches), len(res.Timeouts), hex.EncodeToString(runs[k].AppendBinary(nil)))
		}
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != want {
		t.Fatalf("the encodings hash to %s, want %s (e8ecfa8's)", got, want)
	}
}
