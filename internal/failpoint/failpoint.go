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
// that a host's speed does not decide what the test sees. Only the kill
// takes a count. Every point's name is listed here ([Known]). A spec that
// would arm a point no code hits (a name not listed: a misspelt one), or
// arm nothing (a stop or a sleep with a count, "name@3/sleep=1s"; a count
// that is no whole number from 1; a sleep that is no positive duration;
// an empty name or file), is refused when the process first reads the
// variable (exit status 2, the spec on standard error), as is, in an
// armed process, a hit of a point not listed. Unset (the normal case), a
// point costs one load of a boolean.
package failpoint

import (
	"fmt"
	"maps"
	"os"
	"slices"
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

// points lists every point's name: the code's calls of Hit name no other
// (internal/lint checks the literal ones; the families' tests the sink's
// and the checkpoint's), and a spec names one of them.
var points = map[string]bool{
	// cep: a job's checkpoint and its Kafka transactions.
	"barrier.before": true, "barrier.after": true, "snapshot.mid": true, "commit.before-sinks": true,
	"kafka.before-fence": true, "kafka.restore": true, "kafka.before-commit": true,
	"kafka.after-commit": true, "kafka.ends-committed": true, "lookup.in-flight": true,
	// runtime/kafka: a transaction's records all acknowledged, before its commit.
	"kafka.flushed": true,
	// runtime/state: the steps of a checkpoint's commit ("checkpoint." + step).
	"checkpoint.written": true, "checkpoint.synced": true, "checkpoint.renamed": true,
	"checkpoint.parent-synced": true, "checkpoint.marker-renamed": true, "checkpoint.complete": true,
	// runtime: the file sink's steps ("sink." + step).
	"sink.precommit.synced": true, "sink.precommit.renamed": true, "sink.commit.renamed": true,
	"sink.recover.renamed": true, "sink.recover.deleted": true,
	// cmd/cepheus: a file replaced in place (fmt -w, gen -o).
	"replace.synced": true,
}

// Known reports whether some code hits the point name.
func Known(name string) bool { return points[name] }

// Points returns every point's name, sorted.
func Points() []string { return slices.Sorted(maps.Keys(points)) }

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
	sp, err := parse(v)
	if err != nil {
		// A spec that can never hit would let a crash test pass
		// without its crash: refuse it before anything runs past it.
		fmt.Fprintf(os.Stderr, "failpoint: %v\n", err)
		os.Exit(2)
	}
	name, nth, stopWhen, sleepFor = sp.name, sp.nth, sp.stopWhen, sp.sleepFor
	armed.Store(name != "")
}

// spec is a parsed CEPHEUS_FAILPOINT; an empty name arms nothing.
type spec struct {
	name     string
	nth      int64
	stopWhen string
	sleepFor time.Duration
}

// parse reads the variable's value v: "NAME", "NAME@N" (N from 1),
// "NAME/stop-when=PATH" or "NAME/sleep=DURATION" (a positive duration).
// It refuses what would arm a point no code hits, or arm nothing: a
// crash test so armed would pass without its kill, stop or sleep. No
// point's name holds an '@', so an '@' must start a kill's count; a stop
// or a sleep takes none ("name@3/sleep=1s").
func parse(v string) (spec, error) {
	sp := spec{name: v, nth: 1}
	refuse := func(why string) (spec, error) {
		return spec{}, fmt.Errorf("%s=%q: %s", EnvVar, v, why)
	}
	if n, path, ok := strings.Cut(v, stopWhenSep); ok {
		if path == "" {
			return refuse("a stop names the file whose existence stops the process (NAME/stop-when=FILE)")
		}
		sp.name, sp.stopWhen = n, path
	} else if n, d, ok := strings.Cut(v, sleepSep); ok {
		if sp.sleepFor, _ = time.ParseDuration(d); sp.sleepFor <= 0 {
			return refuse("a sleep takes a positive duration (NAME/sleep=100ms)")
		}
		sp.name = n
	} else if i := strings.LastIndexByte(v, '@'); i >= 0 {
		n, err := strconv.ParseInt(v[i+1:], 10, 64)
		if err != nil || n < 1 {
			return refuse("a kill's count is a whole number from 1 (NAME@N)")
		}
		sp.name, sp.nth = v[:i], n
	}
	switch {
	case strings.Contains(sp.name, "@") && (sp.stopWhen != "" || sp.sleepFor > 0):
		return refuse("a stop (NAME/stop-when=FILE) or a sleep (NAME/sleep=DURATION) takes no count; only a kill does (NAME@N)")
	case !Known(sp.name): // no listed name is empty or holds an '@'
		return refuse("no point has that name (the points: " + strings.Join(Points(), ", ") + ")")
	}
	return sp, nil
}

// Armed reports whether the environment arms a failpoint.
func Armed() bool {
	once.Do(load)
	return armed.Load()
}

// Hit kills the process when point is the armed failpoint and this is its
// Nth hit, or stops it when the failpoint's file exists (once).
func Hit(point string) {
	if !Armed() {
		return
	}
	if !Known(point) {
		// A point missing from the list could never be armed: a crash
		// test meant for it would pass without its crash.
		fmt.Fprintf(os.Stderr, "failpoint: the point %q is hit but not listed in package failpoint\n", point)
		os.Exit(2)
	}
	if point != name {
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
