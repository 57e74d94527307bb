package runtime

import (
	"testing"
	"time"

	"github.com/cepheus-cep/cepheus/event"
)

// fakeClock is an injected wall clock.
type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time       { return c.t }
func (c *fakeClock) step(d time.Duration) { c.t = c.t.Add(d) }
func newFakeClock() *fakeClock            { return &fakeClock{t: time.Unix(1_700_000_000, 0)} }
func part(i int, name string) Partition   { return Partition{Index: i, Name: name, Path: name} }
func wmOf(w event.Watermark, ok bool) string {
	return map[bool]string{true: w.String(), false: "-"}[ok]
}

func TestPartitionWatermarksIdleness(t *testing.T) {
	clk := newFakeClock()
	w, err := NewPartitionWatermarks(PartitionWatermarksConfig{
		OutOfOrderness: 10 * time.Millisecond, IdleTimeout: time.Second, Now: clk.now,
	})
	if err != nil {
		t.Fatal(err)
	}
	for i, name := range []string{"a", "b"} {
		if err := w.Add(part(i, name), false); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Add(part(1, "b"), false); err == nil {
		t.Error("index added twice")
	}
	check := func(what string, got event.Watermark, ok bool, want string) {
		t.Helper()
		if s := wmOf(got, ok); s != want {
			t.Errorf("%s: %s, want %s", what, s, want)
		}
	}
	// The minimum over both: b has no timestamp yet.
	w1, ok := w.OnEvent(0, 1000)
	check("a@1000", w1, ok, "-")
	w1, ok = w.OnEvent(1, 500)
	check("b@500", w1, ok, event.Watermark(489).String())
	w1, ok = w.OnEvent(0, 2000)
	check("a@2000", w1, ok, "-")
	// b goes quiet; a goes on. After the timeout b is idle: a alone counts.
	w.Tick()
	clk.step(600 * time.Millisecond)
	w.OnEvent(0, 3000)
	w1, ok = w.Tick()
	check("tick at 0.6s", w1, ok, "-")
	clk.step(500 * time.Millisecond)
	w1, ok = w.Tick()
	check("tick at 1.1s, b idle", w1, ok, event.Watermark(2989).String())
	if !w.Idle(1) || w.Idle(0) {
		t.Errorf("idle: a %v, b %v", w.Idle(0), w.Idle(1))
	}
	// b's next record makes it active again; behind the watermark it holds
	// it in place, which never goes back.
	w1, ok = w.OnEvent(1, 600)
	check("b@600", w1, ok, "-")
	if w.Idle(1) || w.Current() != 2989 {
		t.Errorf("b idle %v, watermark %v", w.Idle(1), w.Current())
	}
	w1, ok = w.OnEvent(1, 4000)
	check("b@4000", w1, ok, "-") // a (3000) is the minimum now
	w1, ok = w.OnEvent(0, 5000)
	check("a@5000", w1, ok, event.Watermark(3989).String())
	// Both quiet: all idle, the maximum reached (a's 4989); no wall-clock
	// advance without the option.
	clk.step(2 * time.Second)
	w.Tick()
	clk.step(2 * time.Second)
	w1, ok = w.Tick()
	check("all idle", w1, ok, event.Watermark(4989).String())
	clk.step(time.Hour)
	w1, ok = w.Tick()
	check("an hour later", w1, ok, "-")
	// A finished partition no longer counts.
	w1, ok = w.OnEvent(1, 6000)
	check("b@6000, a idle", w1, ok, event.Watermark(5989).String())
	w1, ok = w.OnEvent(0, 9000)
	check("a@9000", w1, ok, "-")
	w1, ok = w.Finish(1)
	check("b finished", w1, ok, event.Watermark(8989).String())
}

func TestPartitionWatermarksWallClockAdvance(t *testing.T) {
	clk := newFakeClock()
	cfg := PartitionWatermarksConfig{
		OutOfOrderness: 5 * time.Second, IdleTimeout: 10 * time.Second, WallClockAdvance: true, Now: clk.now,
	}
	w, err := NewPartitionWatermarks(cfg)
	if err != nil {
		t.Fatal(err)
	}
	w.Add(part(0, "a"), true)
	w.Add(part(1, "b"), true)
	// A replay of dated events (2021), far behind the wall clock.
	const t0 = event.Time(1_609_459_200_000)
	w.OnEvent(0, t0)
	w.OnEvent(1, t0+1000)
	w.Tick() // sees the records: the input goes quiet from here
	if w.Current() != t0-5001 {
		t.Fatalf("watermark %d", w.Current()-t0)
	}
	// Quiet, not idle yet: nothing moves.
	clk.step(9 * time.Second)
	if _, ok := w.Tick(); ok {
		t.Fatal("advanced before idleness")
	}
	// Both idle after 10s: the maximum reached (t0+1000-5001) plus the 10s
	// elapsed since the last records; later ticks add what elapsed, never
	// the wall clock itself.
	clk.step(time.Second)
	if got, ok := w.Tick(); !ok || got != t0+1000-5001+10_000 {
		t.Fatalf("idle tick: %d, %v", got-t0, ok)
	}
	clk.step(50 * time.Second)
	if got, ok := w.Tick(); !ok || got != t0+1000-5001+60_000 {
		t.Fatalf("a minute quiet: %d, %v", got-t0, ok)
	}
	if w.Current() >= event.Time(clk.t.UnixMilli())-3_600_000 {
		t.Fatal("the watermark jumped to the wall clock")
	}
	// A new record: active again; the watermark stays (never back), the
	// advance stops, and starts again from the new time after the next
	// quiet stretch.
	w.OnEvent(0, t0+100_000)
	w.Tick()
	advanced := w.Current()
	clk.step(5 * time.Second)
	if _, ok := w.Tick(); ok {
		t.Fatal("advanced while a is active")
	}
	clk.step(5 * time.Second)
	got, ok := w.Tick()
	if want := t0 + 100_000 - 5001 + 10_000; !ok || got != want || got <= advanced {
		t.Fatalf("second quiet stretch: %d, %v; want %d", got-t0, ok, want-t0)
	}
	// An unfollowed partition blocks the advance while it is unfinished.
	w.Add(part(2, "file"), false)
	w.OnEvent(2, t0+200_000)
	w.Tick()
	clk.step(20 * time.Second)
	w.Tick()
	before := w.Current()
	clk.step(20 * time.Second)
	if got, ok := w.Tick(); ok {
		t.Fatalf("advanced to %d with an unfollowed partition", got-t0)
	}
	if w.Current() != before {
		t.Fatal("moved")
	}
	w.Finish(2)
	if got, ok := w.Tick(); !ok || got != t0+200_000-5001+40_000 {
		t.Fatalf("after the unfollowed one finished: %d, %v", got-t0, ok)
	}

	// Checkpoint and restore: the combined watermark and each partition's
	// largest timestamp, by name.
	b, err := w.AppendBinary(nil)
	if err != nil {
		t.Fatal(err)
	}
	w2, _ := NewPartitionWatermarks(cfg)
	if err := w2.Restore(b); err != nil {
		t.Fatal(err)
	}
	if w2.Current() != w.Current() {
		t.Fatalf("restored watermark %d, want %d", w2.Current(), w.Current())
	}
	w2.Add(part(0, "b"), true) // another index, the same name
	w2.Add(part(1, "new"), true)
	w2.OnEvent(1, t0+500_000)
	w2.Tick()
	clk.step(10 * time.Second)
	got, ok = w2.Tick()
	// Idle: the maximum reached is the new partition's; the advance adds
	// the 10s since its record.
	if want := t0 + 500_000 - 5001 + 10_000; !ok || got != want {
		t.Fatalf("restored: %d, %v; want %d", got-t0, ok, want-t0)
	}
	if err := w2.Restore(b); err == nil {
		t.Error("Restore after Add")
	}
	for n := range len(b) {
		w3, _ := NewPartitionWatermarks(cfg)
		if err := w3.Restore(b[:n]); err == nil {
			t.Errorf("prefix %d restored", n)
		}
	}
}

// TestPartitionWatermarksIdleWhenCaughtUp: with IdleWhenCaughtUp a quiet
// partition that is not caught up to its end (a lagging reader) keeps
// holding the watermark back; once caught up and quiet for the timeout it
// is idle, and a batch that says it is behind again ends its idleness.
// CaughtUp says whether all are.
func TestPartitionWatermarksIdleWhenCaughtUp(t *testing.T) {
	clk := newFakeClock()
	w, err := NewPartitionWatermarks(PartitionWatermarksConfig{
		OutOfOrderness: 10 * time.Millisecond, IdleTimeout: time.Second, IdleWhenCaughtUp: true, Now: clk.now,
	})
	if err != nil {
		t.Fatal(err)
	}
	for i, name := range []string{"a", "b"} {
		if err := w.Add(part(i, name), true); err != nil {
			t.Fatal(err)
		}
	}
	w.OnEvent(0, 1000)
	w.OnEvent(1, 500)
	w.Tick()
	// b is silent for 5 s but not caught up: not idle.
	for range 5 {
		clk.step(time.Second)
		w.OnEvent(0, 3000)
		w.Tick()
	}
	if w.Idle(1) || w.Current() != 489 {
		t.Fatalf("a lagging partition: idle %v, watermark %v; want not idle, 489", w.Idle(1), w.Current())
	}
	if w.CaughtUp() {
		t.Fatal("no partition caught up, and CaughtUp says all are")
	}
	// Caught up: idle after the timeout, and a alone counts.
	w.SetCaughtUp(1, true)
	if w.CaughtUp() {
		t.Fatal("a not caught up, and CaughtUp says all are")
	}
	w.SetCaughtUp(0, true)
	if !w.CaughtUp() {
		t.Fatal("both caught up, and CaughtUp says not")
	}
	w.SetCaughtUp(0, false)
	clk.step(time.Second)
	w.OnEvent(0, 3000)
	if wm, ok := w.Tick(); !ok || wm != 2989 || !w.Idle(1) {
		t.Fatalf("caught up and quiet: %v %v, idle %v; want 2989, idle", wm, ok, w.Idle(1))
	}
	// Behind again (its end moved, no record fetched yet): not idle.
	w.SetCaughtUp(1, false)
	if w.Idle(1) {
		t.Fatal("a partition behind its end is still idle")
	}
	if w.Current() != 2989 {
		t.Fatalf("the watermark went back to %v", w.Current())
	}
}

// TestPartitionWatermarksWakeTogether: with IdleWhenCaughtUp, after a
// silence that made every partition idle, the first partition whose
// records come does not move the watermark alone: the other idle ones
// hold it back at theirs (their records of the same burst may not be
// handed over yet) until their records come or they are quiet for the
// timeout again.
func TestPartitionWatermarksWakeTogether(t *testing.T) {
	clk := newFakeClock()
	w, err := NewPartitionWatermarks(PartitionWatermarksConfig{
		OutOfOrderness: 10 * time.Millisecond, IdleTimeout: time.Second, IdleWhenCaughtUp: true, Now: clk.now,
	})
	if err != nil {
		t.Fatal(err)
	}
	for i, name := range []string{"a", "b", "c"} {
		if err := w.Add(part(i, name), true); err != nil {
			t.Fatal(err)
		}
		w.OnEvent(i, 1000)
		w.SetCaughtUp(i, true)
	}
	w.Tick()
	clk.step(2 * time.Second)
	w.Tick()
	if !w.Idle(0) || !w.Idle(1) || !w.Idle(2) || w.Current() != 989 {
		t.Fatalf("after the silence: idle %v %v %v, watermark %v; want all idle, 989", w.Idle(0), w.Idle(1), w.Idle(2), w.Current())
	}
	// A burst: a's records come first, far ahead.
	w.OnEvent(0, 50_000)
	w.Tick()
	if w.Idle(1) || w.Idle(2) || w.Current() != 989 {
		t.Fatalf("a's burst came first: b idle %v, c idle %v, watermark %v; want b and c holding it at 989", w.Idle(1), w.Idle(2), w.Current())
	}
	// b's records of the burst come: on time, and the watermark follows
	// the slower of a and b, c still holding it.
	w.OnEvent(1, 20_000)
	w.Tick()
	if w.Current() != 989 {
		t.Fatalf("b's records came, c holds nothing new: watermark %v, want 989 until c is idle again", w.Current())
	}
	// c had nothing: idle again after the timeout, then b's watermark
	// is the lowest.
	clk.step(500 * time.Millisecond)
	w.OnEvent(0, 50_000)
	w.OnEvent(1, 20_000)
	w.Tick()
	clk.step(700 * time.Millisecond)
	w.OnEvent(0, 50_000)
	w.OnEvent(1, 20_000)
	if wm, ok := w.Tick(); !ok || wm != 19_989 || !w.Idle(2) || w.Idle(1) {
		t.Fatalf("c quiet for the timeout: %v %v, c idle %v, b idle %v; want 19989 from b, c idle", wm, ok, w.Idle(2), w.Idle(1))
	}
	// Without IdleWhenCaughtUp (files), a partition's burst after a
	// silence does not wake the others.
	f, err := NewPartitionWatermarks(PartitionWatermarksConfig{OutOfOrderness: 10 * time.Millisecond, IdleTimeout: time.Second, Now: clk.now})
	if err != nil {
		t.Fatal(err)
	}
	for i, name := range []string{"a", "b"} {
		if err := f.Add(part(i, name), true); err != nil {
			t.Fatal(err)
		}
		f.OnEvent(i, 1000)
	}
	f.Tick()
	clk.step(2 * time.Second)
	f.Tick()
	if wm, _ := f.OnEvent(0, 50_000); wm != 49_989 || !f.Idle(1) {
		t.Fatalf("files: a's record after the silence gives %v, b idle %v; want 49989, b idle", wm, f.Idle(1))
	}
}

// TestPartitionWatermarksQuiet: a partition said quiet for at least the
// idle timeout (a followed file closed for inactivity, as one that starts
// closed after a restart) is idle at the next Tick and no longer holds the
// watermark back; one said quiet for less, or with a record since the
// last Tick, is not made idle sooner than its own quiet time says.
func TestPartitionWatermarksQuiet(t *testing.T) {
	clk := newFakeClock()
	w, err := NewPartitionWatermarks(PartitionWatermarksConfig{OutOfOrderness: 10 * time.Millisecond, IdleTimeout: time.Minute, Now: clk.now})
	if err != nil {
		t.Fatal(err)
	}
	for i, name := range []string{"old", "short", "busy", "live"} {
		if err := w.Add(part(i, name), true); err != nil {
			t.Fatal(err)
		}
		w.OnEvent(i, 1000)
	}
	w.Tick()
	w.OnEvent(2, 1500) // busy: a record before it is said quiet
	w.Quiet(0, 5*time.Minute)
	w.Quiet(1, 30*time.Second)
	w.Quiet(2, 5*time.Minute)
	w.OnEvent(3, 90_000)
	clk.step(time.Second)
	w.Tick()
	if !w.Idle(0) || w.Idle(1) || w.Idle(2) || w.Idle(3) {
		t.Fatalf("idle: old %v short %v busy %v live %v; want old alone", w.Idle(0), w.Idle(1), w.Idle(2), w.Idle(3))
	}
	if got := w.Current(); got != 989 {
		t.Fatalf("watermark %v, want 989 (short's, the lowest of the partitions not idle)", got)
	}
	// short's own 30 s: idle 30 s later, not a whole timeout later.
	clk.step(30 * time.Second)
	w.OnEvent(2, 1500)
	w.OnEvent(3, 90_000)
	w.Tick()
	if !w.Idle(1) || w.Idle(2) {
		t.Fatalf("after 31 s: short idle %v, busy idle %v; want short idle, busy not", w.Idle(1), w.Idle(2))
	}
	if got := w.Current(); got != 1489 {
		t.Fatalf("watermark %v, want 1489 (busy's)", got)
	}
}

// TestPartitionWatermarksUnmodified: a partition whose file had not been
// modified for IdleTimeout when its records were read to its end is idle
// at the next Tick, records read or not; one modified more lately is idle
// once IdleTimeout has passed since its modification; the latest record's
// time is that of the reading (the wall-clock advance counts from it).
func TestPartitionWatermarksUnmodified(t *testing.T) {
	clk := newFakeClock()
	w, err := NewPartitionWatermarks(PartitionWatermarksConfig{OutOfOrderness: 10 * time.Millisecond, IdleTimeout: time.Minute, Now: clk.now})
	if err != nil {
		t.Fatal(err)
	}
	for i, name := range []string{"backlog", "recent", "live"} {
		if err := w.Add(part(i, name), true); err != nil {
			t.Fatal(err)
		}
	}
	clk.step(time.Second)
	w.OnEvent(0, 5000)
	w.OnEvent(1, 3000)
	w.OnEvent(2, 1000)
	w.Unmodified(0, 2*time.Hour)
	w.Unmodified(1, 30*time.Second)
	w.Tick()
	if !w.Idle(0) || w.Idle(1) || w.Idle(2) {
		t.Fatalf("idle: backlog %v recent %v live %v; want backlog alone", w.Idle(0), w.Idle(1), w.Idle(2))
	}
	if got := w.Current(); got != 989 {
		t.Fatalf("watermark %v, want 989 (live's, the lowest of the partitions not idle)", got)
	}
	// recent's 30 s: idle 30 s later, not a whole timeout after its
	// records were read.
	clk.step(30 * time.Second)
	w.OnEvent(2, 1000)
	w.Tick()
	if !w.Idle(1) || w.Idle(2) {
		t.Fatalf("30 s on: recent idle %v, live idle %v; want recent idle, live not", w.Idle(1), w.Idle(2))
	}
	if w.lastRecord != clk.now() {
		t.Errorf("latest record at %v, want the last Tick's %v", w.lastRecord, clk.now())
	}
	// A partition that finished is left alone.
	w.Finish(2)
	w.Unmodified(2, time.Hour)
	if w.Idle(2) {
		t.Error("a finished partition made idle")
	}
}

// TestPartitionWatermarksCarry: the combiner of the job after a switch
// takes the activity of the one before: a partition idle before is idle
// at the first Tick, one with a record just before the switch is not,
// and the latest record's time goes on. Each partition held the
// watermark back for a whole IdleTimeout after every deploy before.
func TestPartitionWatermarksCarry(t *testing.T) {
	clk := newFakeClock()
	cfg := PartitionWatermarksConfig{OutOfOrderness: 10 * time.Millisecond, IdleTimeout: time.Minute, Now: clk.now}
	w, err := NewPartitionWatermarks(cfg)
	if err != nil {
		t.Fatal(err)
	}
	names := []string{"quiet", "live", "fresh"}
	for i, name := range names {
		if err := w.Add(part(i, name), true); err != nil {
			t.Fatal(err)
		}
		w.OnEvent(i, 1000)
	}
	w.Tick()
	clk.step(2 * time.Minute)
	w.OnEvent(1, 90_000)
	w.OnEvent(2, 90_000)
	w.Tick()
	clk.step(time.Second)
	w.OnEvent(2, 91_000) // a record after the last Tick: fresh is active at the switch
	if !w.Idle(0) || w.Idle(1) || w.Idle(2) {
		t.Fatalf("before the switch: idle %v %v %v, want quiet alone", w.Idle(0), w.Idle(1), w.Idle(2))
	}
	a := w.Activity()
	if want := clk.now(); !a.LastRecord.Equal(want) {
		t.Errorf("last record %v, want %v (fresh's, after the last Tick)", a.LastRecord, want)
	}

	clk.step(time.Second)
	w2, err := NewPartitionWatermarks(cfg)
	if err != nil {
		t.Fatal(err)
	}
	w2.Carry(a)
	for i, name := range names {
		if err := w2.Add(part(i, name), true); err != nil {
			t.Fatal(err)
		}
	}
	w2.OnEvent(1, 120_000)
	w2.OnEvent(2, 120_000)
	w2.Tick()
	if !w2.Idle(0) || w2.Idle(1) || w2.Idle(2) {
		t.Fatalf("after the switch: idle %v %v %v, want quiet alone, at once", w2.Idle(0), w2.Idle(1), w2.Idle(2))
	}
	if got := w2.Current(); got != 119_989 {
		t.Fatalf("watermark %v after the switch, want 119989 (live's and fresh's): quiet, idle for 2 minutes, no longer holds it back", got)
	}
}

func TestWatermarkStateRoundTrip(t *testing.T) {
	w, err := NewPartitionWatermarks(PartitionWatermarksConfig{OutOfOrderness: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	for i, name := range []string{"t-0", "t-1", "t-2"} {
		if err := w.Add(Partition{Index: i, Name: name}, false); err != nil {
			t.Fatal(err)
		}
	}
	w.OnEvent(0, 5000)
	w.OnEvent(1, 9000)
	b, err := w.AppendBinary(nil)
	if err != nil {
		t.Fatal(err)
	}
	st, err := DecodeWatermarkState(b)
	if err != nil {
		t.Fatal(err)
	}
	// t-2 has seen nothing: it holds the combined watermark back and has
	// no entry.
	if st.Emitted != w.Current() || len(st.Max) != 2 || st.Max["t-0"] != 5000 || st.Max["t-1"] != 9000 {
		t.Fatalf("decoded %+v, want emitted %v and t-0 5000, t-1 9000", st, w.Current())
	}
	// A state of a subset, built from it, restores that subset.
	sub := WatermarkState{Emitted: st.Emitted, Max: map[string]event.Time{"t-1": st.Max["t-1"]}}
	b2, err := sub.AppendBinary(nil)
	if err != nil {
		t.Fatal(err)
	}
	r, err := NewPartitionWatermarks(PartitionWatermarksConfig{OutOfOrderness: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Restore(b2); err != nil {
		t.Fatal(err)
	}
	if err := r.Add(Partition{Index: 1, Name: "t-1"}, false); err != nil {
		t.Fatal(err)
	}
	if got := r.Of(1); got != event.Watermark(8000-1) {
		t.Errorf("restored t-1 watermark %v, want %v (9000 - 1s - 1ms)", got, event.Watermark(8000-1))
	}
	if _, err := DecodeWatermarkState(b2[:len(b2)-1]); err == nil {
		t.Error("a truncated state decoded")
	}
}

// TestPartitionWatermarksRemove: a partition removed (its file gone) no
// longer holds the watermark back, leaves the encoded state, and a
// partition that takes its name later starts without a timestamp, even
// when a restore gave the name one.
func TestPartitionWatermarksRemove(t *testing.T) {
	w, err := NewPartitionWatermarks(PartitionWatermarksConfig{OutOfOrderness: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	st := WatermarkState{Emitted: 990, Max: map[string]event.Time{"old": 1000, "live": 1000}}
	b, err := st.AppendBinary(nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Restore(b); err != nil {
		t.Fatal(err)
	}
	for i, name := range []string{"old", "live"} {
		if err := w.Add(part(i, name), true); err != nil {
			t.Fatal(err)
		}
	}
	w.OnEvent(1, 5000)
	if got := w.Current(); got != 990 {
		t.Fatalf("watermark %v, want 990 (old's, restored)", got)
	}
	if got := wmOf(w.Remove(0)); got != event.Watermark(4989).String() {
		t.Fatalf("Remove(old) = %s, want 4989 (live's alone)", got)
	}
	if b, err = w.AppendBinary(nil); err != nil {
		t.Fatal(err)
	}
	if st, err = DecodeWatermarkState(b); err != nil {
		t.Fatal(err)
	}
	if len(st.Max) != 1 || st.Max["live"] != 5000 {
		t.Fatalf("state after the removal: %v, want live's alone", st.Max)
	}
	// A new file under the old name: no timestamp, so it holds the
	// watermark at its first record's.
	if err := w.Add(part(2, "old"), true); err != nil {
		t.Fatal(err)
	}
	if got := w.Of(2); got != event.MinTime {
		t.Fatalf("the new old's watermark %v, want none yet", got)
	}
	w.OnEvent(2, 7000)
	w.OnEvent(1, 9000)
	if got := w.Current(); got != 6989 {
		t.Fatalf("watermark %v, want 6989 (the new old's)", got)
	}
}

// TestPartitionWatermarksRemovedWallClock: the wall-clock advance goes on
// once the files of a followed directory are all deleted while closed, as
// it did while they were closed (an idle partition each): the stream is
// quiet, not ended. It stopped at the deletion of the last one, so that
// an absence rule waited for the next file's first record.
func TestPartitionWatermarksRemovedWallClock(t *testing.T) {
	clk := newFakeClock()
	w, err := NewPartitionWatermarks(PartitionWatermarksConfig{
		OutOfOrderness: 5 * time.Second, IdleTimeout: 10 * time.Second, WallClockAdvance: true, Now: clk.now,
	})
	if err != nil {
		t.Fatal(err)
	}
	w.Add(part(0, "a"), true)
	const t0 = event.Time(1_609_459_200_000)
	w.OnEvent(0, t0)
	w.Tick()
	clk.step(10 * time.Second)
	if got, ok := w.Tick(); !ok || got != t0-5001+10_000 {
		t.Fatalf("idle tick: %d, %v", got-t0, ok)
	}
	w.Remove(0)
	clk.step(50 * time.Second)
	if got, ok := w.Tick(); !ok || got != t0-5001+60_000 {
		t.Fatalf("a minute quiet, the file deleted: %d, %v; want the advance to go on", got-t0, ok)
	}
	// A new file's first record: the advance stops while it is active.
	w.Add(part(1, "b"), true)
	w.OnEvent(1, t0+120_000)
	w.Tick()
	clk.step(5 * time.Second)
	if _, ok := w.Tick(); ok {
		t.Fatal("advanced while b is active")
	}
}
