package main

import (
	"context"
	"math"
	"runtime/debug"
	"runtime/metrics"
	"time"
)

// memoryGuardAt is the share of the soft memory limit the live heap may
// reach before guardMemoryLimit raises the limit; memoryLowerAt the share
// of a raised limit below which it lowers it again; memoryGuardEvery how
// often it looks.
const (
	memoryGuardAt    = 0.75
	memoryLowerAt    = 0.375
	memoryGuardEvery = 250 * time.Millisecond
)

// guardMemoryLimit raises the default soft memory limit while ctx lasts
// whenever the live heap passes memoryGuardAt of it, to twice the live
// heap, and tells note. Near the limit the collector runs again and
// again, for less and less, up to half the CPU: a backtest of a million
// distinct keys took 28.7 CPU-s under the default 368 MiB against 6.2
// without a limit (10.8 with the raise), its live state being larger. The default limit is there to keep a
// small heap from growing to five times its live size (GOGC 400), not to
// slow a large state down; a limit the user gives is left alone. A
// raised limit is lowered again, to twice the live heap but never below
// the limit it started with, once the live heap falls under memoryLowerAt
// of it (a peak that passed: a deploy's two versions of the rules, a
// restore), so that a long-running process does not keep the memory of
// its largest moment. floor is the default limit the run sets (the guard
// may start before it is set). It returns once ctx is done.
func guardMemoryLimit(ctx context.Context, floor int64, note func(format string, args ...any)) {
	sample := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	tick := time.NewTicker(memoryGuardEvery)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		limit := debug.SetMemoryLimit(-1)
		if limit == math.MaxInt64 || limit <= 0 {
			continue
		}
		metrics.Read(sample)
		if sample[0].Value.Kind() != metrics.KindUint64 {
			return
		}
		live := int64(sample[0].Value.Uint64())
		if limit > floor && float64(live) < memoryLowerAt*float64(limit) {
			debug.SetMemoryLimit(max(2*live, floor)) // silently: the end of a backtest's flush does it
			continue
		}
		if float64(live) < memoryGuardAt*float64(limit) {
			continue
		}
		raised := 2 * live
		debug.SetMemoryLimit(raised)
		neared := "neared"
		if live >= limit {
			neared = "passed" // between two looks (a restore reads much at once)
		}
		note("the live heap (%d MiB) %s the memory limit (%d MiB): raised to %d MiB, "+
			"as the collector would otherwise take much of the CPU (-memory-limit sets a limit of your own; 0: none)",
			live>>20, neared, limit>>20, raised>>20)
	}
}

// goGuardMemoryLimit runs guardMemoryLimit until the returned function is
// called, which waits for it to end.
func goGuardMemoryLimit(ctx context.Context, floor int64, note func(format string, args ...any)) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		guardMemoryLimit(ctx, floor, note)
		close(done)
	}()
	return func() {
		cancel()
		<-done
	}
}
