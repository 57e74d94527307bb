package main

import (
	"context"
	"fmt"
	goruntime "runtime"
	"runtime/debug"
	"strings"
	"testing"
	"time"
)

// TestGuardMemoryLimit: a live heap past three quarters of the soft
// memory limit raises the limit to twice the live heap, once, and says
// so; a live heap well under it leaves the limit alone.
func TestGuardMemoryLimit(t *testing.T) {
	saved := debug.SetMemoryLimit(-1)
	t.Cleanup(func() { debug.SetMemoryLimit(saved) })
	goruntime.GC()
	debug.SetMemoryLimit(1 << 40) // far above the live heap: nothing to do
	notes := make(chan string, 8)
	note := func(format string, args ...any) { notes <- fmt.Sprintf(format, args...) }
	stop := goGuardMemoryLimit(context.Background(), 1<<40, note)
	time.Sleep(3 * memoryGuardEvery)
	stop()
	if len(notes) > 0 || debug.SetMemoryLimit(-1) != 1<<40 {
		t.Fatalf("a limit far above the live heap changed: %d, %q", debug.SetMemoryLimit(-1), <-notes)
	}

	held := make([][]byte, 64) // 64 MiB live
	for i := range held {
		held[i] = make([]byte, 1<<20)
	}
	goruntime.GC()
	debug.SetMemoryLimit(72 << 20)
	stop = goGuardMemoryLimit(context.Background(), 72<<20, note)
	defer stop()
	var msg string
	select {
	case msg = <-notes:
	case <-time.After(10 * time.Second):
		t.Fatal("a live heap near the limit did not raise it")
	}
	limit := debug.SetMemoryLimit(-1)
	if limit < 128<<20 || limit > 256<<20 || !strings.Contains(msg, "neared the memory limit (72 MiB): raised to") {
		t.Errorf("limit %d MiB after the raise, note %q; want about twice the live 64 MiB", limit>>20, msg)
	}
	time.Sleep(3 * memoryGuardEvery)
	if len(notes) > 0 {
		t.Errorf("raised again without the heap growing: %q", <-notes)
	}
	goruntime.KeepAlive(held)

	// The peak passed: the raised limit comes down to the one the guard
	// started with (twice the small live heap is below it).
	held = nil
	goruntime.GC()
	deadline := time.Now().Add(10 * time.Second)
	for debug.SetMemoryLimit(-1) != 72<<20 {
		if time.Now().After(deadline) {
			t.Fatalf("limit %d MiB 10 s after the heap shrank; want the 72 MiB the guard started with", debug.SetMemoryLimit(-1)>>20)
		}
		time.Sleep(memoryGuardEvery / 5)
	}
	time.Sleep(3 * memoryGuardEvery)
	if len(notes) > 0 || debug.SetMemoryLimit(-1) != 72<<20 {
		t.Errorf("changed again without the heap changing: limit %d MiB, %d notes", debug.SetMemoryLimit(-1)>>20, len(notes))
	}
}
