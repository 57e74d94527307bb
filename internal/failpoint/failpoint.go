// Package failpoint kills the process at named points, for the crash
// tests: the environment variable CEPHEUS_FAILPOINT names a point, and
// the process sends itself SIGKILL when it reaches it, as a power cut or
// kill -9 would. "name" kills at the first hit, "name@N" at the Nth (N
// from 1). "name/stop-when=PATH" instead stops the process (SIGSTOP, as
// a pause would; Unix only) at the first hit once the file PATH exists:
// a test pauses it at a point of its choosing, at a moment of its
// choosing, and resumes it with SIGCONT. "name/sleep=DURATION" makes the
// goroutine that hits the point sleep that long at every hit: a test
// bounds how fast a process runs (its checkpoints' barriers, say), so
// that a host's speed does not decide what the test sees. Unset (the
// normal case), a point costs one load of a boolean.
package failpoint

import (
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// EnvVar is the environment variable that arms a failpoint.
const EnvVar = "CEPHEUS_FAILPOINT"

var (
	once  sync.Once
	armed atomic.Bool
	name  string
	nth   int64
	hits  atomic.Int64
	// stopWhen is the file whose existence stops the process at the
	// point ("name/stop-when=PATH"); stopped, that it did.
	stopWhen string
	stopped  atomic.Bool
	// sleepFor is the sleep at every hit ("name/sleep=DURATION").
	sleepFor time.Duration
)

// stopWhenSep separates a point's name from the file that stops the
// process there.
const stopWhenSep = "/stop-when="

// sleepSep separates a point's name from the sleep at each of its hits.
const sleepSep = "/sleep="

func load() {
	v := os.Getenv(EnvVar)
	if v == "" {
		return
	}
	name, nth = v, 1
	if n, path, ok := strings.Cut(v, stopWhenSep); ok && path != "" {
		name, stopWhen = n, path
	} else if n, d, ok := strings.Cut(v, sleepSep); ok {
		if sleepFor, _ = time.ParseDuration(d); sleepFor <= 0 {
			return // not a sleep: armed with nothing, no point is hit
		}
		name = n
	} else if i := strings.LastIndexByte(v, '@'); i >= 0 {
		if n, err := strconv.ParseInt(v[i+1:], 10, 64); err == nil && n >= 1 {
			name, nth = v[:i], n
		}
	}
	armed.Store(true)
}

// Armed reports whether the environment arms a failpoint.
func Armed() bool {
	once.Do(load)
	return armed.Load()
}

// Hit kills the process when point is the armed failpoint and this is its
// Nth hit, or stops it when the failpoint's file exists (once).
func Hit(point string) {
	if !Armed() || point != name {
		return
	}
	if sleepFor > 0 {
		time.Sleep(sleepFor)
		return
	}
	if stopWhen != "" {
		if _, err := os.Stat(stopWhen); err == nil && stopped.CompareAndSwap(false, true) {
			stopSelf()
		}
		return
	}
	if hits.Add(1) == nth {
		// SIGKILL on Unix (TerminateProcess elsewhere): no deferred
		// function, no flush, as a power cut.
		if p, err := os.FindProcess(os.Getpid()); err == nil && p.Kill() == nil {
			select {} // the signal is on its way
		}
		os.Exit(137) // not killed: never go on past the point
	}
}
