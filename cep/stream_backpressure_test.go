package cep

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"
)

// slowWriter is an alerts writer that takes delay over every Write, as a
// slow terminal or pipe would, and keeps what it is given.
type slowWriter struct {
	delay time.Duration

	mu      sync.Mutex // guards the fields below
	buf     bytes.Buffer
	writes  int
	torn    int            // writes that did not end with a newline
	windows [][2]time.Time // when each Write began and ended
}

func (w *slowWriter) Write(b []byte) (int, error) {
	began := time.Now()
	time.Sleep(w.delay)
	w.mu.Lock()
	defer w.mu.Unlock()
	w.windows = append(w.windows, [2]time.Time{began, time.Now()})
	w.writes++
	if len(b) == 0 || b[len(b)-1] != '\n' {
		w.torn++
	}
	return w.buf.Write(b)
}

// TestStreamBackpressure runs a stream whose alerts go to a writer that
// sleeps on every Write. Without an alerts directory the alerts go to the
// writer when their checkpoint commits, on the subtask's goroutine
// (runtime.WriterSink), so the subtask stops processing while it writes;
// the coordinator and the reader must wait for it rather than queue the
// input. A checkpoint every 2,000 records makes the writer stall the
// subtasks all through the input. Sampled at every tick, the events
// routed and not yet processed (StreamStats.Queued) never exceed what the
// subtasks' channels and batches can hold, and every alert of Engine.Run
// arrives, once, whole.
func TestStreamBackpressure(t *testing.T) {
	seed := streamSeed(t)
	rs := loadCardsRuleset(t)
	// Unpadded: the reader's batches hold 800 to 1,000 records (256 KiB),
	// so that the coordinator fills the subtasks' messages to batchElems;
	// watermarks every 1,024 events do not cut them short (each one
	// flushes the batches being filled).
	const every = 1024
	log := genCardLog(newStreamRand(seed, "backpressure"), logConfig{records: 14000})
	lines := make([]string, len(log))
	for i, r := range log {
		lines[i] = r.line
	}
	path := filepath.Join(t.TempDir(), "events.jsonl")
	writeLogFile(t, path, lines, false)
	sum, want, _, _ := batchRun(t, rs, every, lines)
	slices.Sort(want)
	e := newStreamEngine(t, rs, every)
	for _, tc := range []struct {
		parallelism int
		backend     Backend
	}{{1, BackendMemory}, {2, BackendPebble}} {
		name := fmt.Sprintf("p%d-%s", tc.parallelism, tc.backend)
		t.Run(name, func(t *testing.T) {
			// Per subtask: subtaskBuffer messages in its channel, the
			// one it is processing, and the batch the coordinator fills
			// for it, each of at most batchElems events.
			bound := int64(tc.parallelism * (subtaskBuffer + 2) * batchElems)
			// The scenario (reports while the input is read, and a write
			// that holds the reading back) depends on the scheduling: a
			// loaded or race-instrumented machine may miss it, and the
			// run is tried again (up to 3 times); the properties are
			// checked in every try.
			for try := 1; ; try++ {
				w := &slowWriter{delay: 60 * time.Millisecond}
				var samples []StreamProgress
				var at []time.Time // of each report
				res, err := e.Stream(context.Background(), StreamConfig{
					Events: path, StateDir: t.TempDir(), Alerts: w,
					CheckpointInterval: streamInterval, CheckpointRecords: 2000, Parallelism: tc.parallelism, Backend: tc.backend,
					Progress: func(p StreamProgress) {
						samples = append(samples, p)
						at = append(at, time.Now())
					},
					ProgressInterval: time.Nanosecond,
				})
				if err != nil {
					t.Fatalf("Stream: %v", err)
				}
				if !res.Finished {
					t.Fatalf("not finished")
				}
				// The input is larger than the bound: were the coordinator
				// to queue what it decodes instead of waiting (it decodes
				// far faster than the subtasks process), a report taken
				// while it reads would show more.
				if sum.Decoded <= bound {
					t.Fatalf("%d events, not more than the bound %d", sum.Decoded, bound)
				}
				var most StreamProgress
				reading := 0 // reports taken before the input's end was read
				held := 0    // Writes during which the coordinator, reading, could not report
				for i, p := range samples {
					if p.Queued < 0 || p.Queued > bound {
						t.Errorf("at %v, after %d records, %d events queued: outside [0, %d]", p.Elapsed, p.Records, p.Queued, bound)
					}
					if p.Queued > most.Queued {
						most = p
					}
					if p.RunRecords == sum.Records {
						continue
					}
					reading++
					for _, win := range w.windows {
						if i > 0 && !at[i-1].After(win[0]) && !at[i].Before(win[1]) {
							held++
						}
					}
				}
				if final := samples[len(samples)-1]; final.Queued != 0 || final.RunRecords != sum.Records {
					t.Errorf("the final report has %d events queued after %d records; want 0 after %d", final.Queued, final.RunRecords, sum.Records)
				}
				t.Logf("%d reports, %d while reading; at most %d events queued (bound %d), at %v after %d records; %d writes of alerts, %d holding the reading back",
					len(samples), reading, most.Queued, bound, most.Elapsed, most.Records, w.writes, held)
				// The test tells a bounded queue from an unbounded one only if
				// reports came while the input was read; and the writer must
				// have held the reading back: the coordinator, which reports
				// every tick (5ms) when it is free, made no report during a
				// Write, waiting to send to the subtask stuck in it.
				scenario := reading >= 3 && held > 0
				got := jsonLines(w.buf.Bytes())
				slices.Sort(got)
				if !slices.Equal(got, want) {
					t.Errorf("alerts: %s", multisetDiff(want, got))
				}
				if w.torn != 0 {
					t.Errorf("%d of %d writes ended in the middle of a line", w.torn, w.writes)
				}
				if res.Alerts != sum.Alerts || res.Records != sum.Records {
					t.Errorf("%d alerts over %d records, Engine.Run's %d over %d", res.Alerts, res.Records, sum.Alerts, sum.Records)
				}
				if scenario {
					break
				}
				if try == 3 {
					t.Errorf("%d reports while reading, %d writes without a report: want 3 or more, and 1 or more (in 3 tries)", reading, held)
					break
				}
				t.Logf("try %d: %d reports while reading, %d writes without a report: again", try, reading, held)
			}
		})
	}
}
