package cep

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// randomHeldInput writes files files of random events of cards c0-c5
// into a new directory (read side by side, aligned) and returns it:
// times on a coarse grid, so that events of several files tie, some far
// behind (late), and a line that is not JSON now and then (a dead
// letter).
func randomHeldInput(t *testing.T, rnd *rand.Rand, files, perFile int) string {
	t.Helper()
	dir := t.TempDir()
	base := time.Date(2026, 1, 1, 10, 0, 0, 0, time.UTC)
	types := []string{"auth", "auth", "capture"}
	countries := []string{"US", "FR", "DE"}
	for f := range files {
		var b strings.Builder
		for i := range perFile {
			at := time.Duration(i)*20*time.Second + time.Duration(rnd.IntN(6))*10*time.Second
			if rnd.IntN(40) == 0 {
				at -= 40 * time.Minute // behind the watermark: late
			}
			fmt.Fprintf(&b, `{"ts":%q,"card":"c%d","type":%q,"amount":%d,"country":%q}`+"\n",
				base.Add(at).Format(time.RFC3339), rnd.IntN(6), types[rnd.IntN(3)], rnd.IntN(600), countries[rnd.IntN(3)])
			if rnd.IntN(80) == 0 {
				b.WriteString("not json\n")
			}
		}
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("%c.jsonl", 'a'+f)), []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// TestRestartAggregatesRemovedRandom is TestRestartAggregatesRemoved over
// random inputs: a directory of several files read side by side (events
// of one time from several files, late events, dead letters), random
// parallelism, aggregate workers and checkpoint cadences, the first leg
// stopped at a random checkpoint. A job whose rules drop their
// aggregates at a restart gives, subtask by subtask and key by key, the
// alerts (ids included), late events and dead letters of a job that never
// had them.
func TestRestartAggregatesRemovedRandom(t *testing.T) {
	v1 := heldV1 + heldRecent + heldBusy
	const bound = 30 * time.Minute
	for seed := range uint64(6) {
		rnd := rand.New(rand.NewPCG(seed, 33))
		events := randomHeldInput(t, rnd, 1+rnd.IntN(3), 300+rnd.IntN(300))
		par := 1 + rnd.IntN(3)
		workers := 1 + rnd.IntN(2)
		every := int64(20 + rnd.IntN(100))
		firstStop := int64(1 + rnd.IntN(4))
		t.Run(fmt.Sprintf("seed %d: parallelism %d, %d workers, checkpoints every %d, first leg to %d", seed, par, workers, every, firstStop), func(t *testing.T) {
			legs := func(first string) (streamDirs, int) {
				d := newStreamDirs(t)
				var from int64
				held := 0
				for i, src := range []string{first, heldV1, heldV1} {
					cfg := d.config(events)
					cfg.Parallelism, cfg.AggregateWorkers = par, workers
					cfg.CheckpointInterval, cfg.Keep = time.Hour, 1000
					cfg.CheckpointRecords = every
					stopAt := from + 1
					if i == 0 {
						stopAt = firstStop
					}
					if i < 2 {
						cfg.hooks.afterCommit = func(id int64) bool { return id >= stopAt }
					}
					if i == 1 && first == v1 {
						metas := checkpointMetas(t, d.state)
						held = len(heldAggregates(t, metas[from].Source.Aggregates))
					}
					res, err := heldEngine(t, src, WithOutOfOrderness(bound)).Stream(context.Background(), cfg)
					if err != nil {
						t.Fatalf("leg %d: %v", i, err)
					}
					if res.Restored != from {
						t.Fatalf("leg %d restored %d, want %d", i, res.Restored, from)
					}
					from = res.Stats.LastCheckpoint
				}
				return d, held
			}
			d, held := legs(v1)
			ref, _ := legs(heldV1)
			t.Logf("%d events held by the aggregates at the restart", held)
			got, want := subtaskParts(t, d.alerts, "alerts"), subtaskParts(t, ref.alerts, "alerts")
			total := 0
			for sub := range max(len(got), len(want)) {
				g, w := byKey(t, withoutAggregates(t, got[int64(sub)])), byKey(t, withoutAggregates(t, want[int64(sub)]))
				for key := range w {
					total += len(w[key])
					if !slices.Equal(g[key], w[key]) {
						t.Errorf("subtask %d, key %s: %d alerts, want %d (a job that never had aggregates):\n%s", sub, key, len(g[key]), len(w[key]), multisetDiff(w[key], g[key]))
					}
				}
				for key := range g {
					if w[key] == nil {
						t.Errorf("subtask %d, key %s: %d alerts, a job without aggregates none", sub, key, len(g[key]))
					}
				}
			}
			if total == 0 {
				t.Fatal("no alert: the test checks nothing")
			}
			for _, kind := range []string{"late", "dead"} {
				dir, refDir := d.late, ref.late
				if kind == "dead" {
					dir, refDir = d.dead, ref.dead
				}
				g, w := subtaskParts(t, dir, kind), subtaskParts(t, refDir, kind)
				for sub := range max(len(g), len(w)) {
					// The grown layout (v1's before the restart) shows
					// recent, null in a late event.
					a := slices.Sorted(slices.Values(withoutRecent(t, g[int64(sub)])))
					b := slices.Sorted(slices.Values(withoutRecent(t, w[int64(sub)])))
					if !slices.Equal(a, b) {
						t.Errorf("subtask %d: the %s outputs are not those of a job without aggregates:\n%s", sub, kind, multisetDiff(b, a))
					}
				}
			}
		})
	}
}

// withoutRecent is lines of late events without the field recent of
// their event, marshalled again (keys sorted).
func withoutRecent(t *testing.T, lines []string) []string {
	t.Helper()
	return rewriteJSONLines(t, lines, func(a map[string]any) bool {
		if ev, ok := a["event"].(map[string]any); ok {
			delete(ev, "recent")
		}
		return true
	})
}
