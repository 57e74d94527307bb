package difftest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	goruntime "runtime"
	"runtime/debug"
	"strings"
	"sync"
	"time"

	"github.com/cepheus-cep/cepheus/internal/conformance"
)

// ErrNoJava is returned when java (to run the Flink runner) or mvn (to
// build it) is not installed.
var ErrNoJava = errors.New("difftest: the Flink runner needs java (and mvn to build it)")

// FindJar returns the Flink runner's jar, building it when no jar exists for
// the current sources: it runs scripts/flinkcep-jar.sh of the repository at
// root (see benchmarks/flinkcep/README.md). The script's log goes to logw.
func FindJar(ctx context.Context, root string, logw io.Writer) (string, error) {
	if _, err := exec.LookPath("java"); err != nil {
		return "", fmt.Errorf("%w: java not found on PATH", ErrNoJava)
	}
	script := filepath.Join(root, "scripts", "flinkcep-jar.sh")
	cmd := exec.CommandContext(ctx, script)
	cmd.Dir = root
	cmd.Stderr = logw
	out, err := cmd.Output()
	if err != nil {
		if _, lerr := exec.LookPath("mvn"); lerr != nil {
			return "", fmt.Errorf("%w: no cached jar and mvn not found on PATH (%s: %v)", ErrNoJava, script, err)
		}
		return "", fmt.Errorf("difftest: %s: %w", script, err)
	}
	jar := strings.TrimSpace(string(out))
	if jar == "" {
		return "", fmt.Errorf("difftest: %s printed no jar path", script)
	}
	return jar, nil
}

// Flink runs the Flink runner jar over every case file of dir (one JVM for
// all of them) and returns the results it wrote. A case still running after
// caseTimeout gets an error result. The runner's log (one line per failing
// case, then a summary) is appended to logPath.
func Flink(ctx context.Context, jar, dir string, caseTimeout time.Duration, logPath string) (*conformance.Results, error) {
	if _, err := exec.LookPath("java"); err != nil {
		return nil, fmt.Errorf("%w: java not found on PATH", ErrNoJava)
	}
	out := filepath.Join(dir, "flink-results.json.out")
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return nil, fmt.Errorf("difftest: %w", err)
	}
	defer logf.Close()
	// -XX:-OmitStackTraceInFastThrow: an exception that the JIT has seen
	// thrown many times keeps its message (otherwise a run of thousands of
	// cases gets a preallocated NullPointerException whose message is
	// "null" where a single case gets "... SharedBuffer.getEvent(...) is
	// null", which event-id-collision reads).
	cmd := exec.CommandContext(ctx, "java", "-XX:+UseSerialGC", "-XX:-OmitStackTraceInFastThrow", "-jar", jar,
		"cases", "--dir", dir, "--out", out, "--timeout-ms", fmt.Sprint(caseTimeout.Milliseconds()))
	cmd.Stdout = logf
	cmd.Stderr = logf
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("difftest: flink runner on %s: %w (log in %s)", dir, err, logPath)
	}
	rs, err := conformance.ReadResults(out)
	if err != nil {
		return nil, fmt.Errorf("difftest: flink runner: %w", err)
	}
	return rs, nil
}

// Cepheus runs the inputs through Cepheus's conformance drivers
// ([conformance.RunCase]), several at a time, in this process. A case
// still running after caseTimeout gets an error result; its goroutine is
// abandoned (it ends with the process). The results are passed through the
// results file format, so that they are what a results file would say.
//
// A case that crashes the process (a fatal stack overflow, say) takes the
// whole run with it; [CepheusWorker] runs the cases in a child process
// instead and survives that.
func Cepheus(ctx context.Context, inputs []conformance.Input, caseTimeout time.Duration) (*conformance.Results, error) {
	rs := &conformance.Results{Cases: make(map[string]*conformance.Result, len(inputs))}
	var mu sync.Mutex
	work := make(chan *conformance.Input)
	var wg sync.WaitGroup
	for range goruntime.GOMAXPROCS(0) {
		wg.Go(func() {
			for in := range work {
				r := runWithTimeout(in, caseTimeout)
				mu.Lock()
				rs.Cases[in.ID] = r
				mu.Unlock()
			}
		})
	}
	for i := range inputs {
		if ctx.Err() != nil {
			break
		}
		work <- &inputs[i]
	}
	close(work)
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return throughFile(rs)
}

// WorkerEnv is the environment variable that makes a command that calls
// [MaybeServeWorker] first serve as a Cepheus worker.
const WorkerEnv = "DIFFTEST_CEPHEUS_WORKER"

// workerCrashEnv names a case on which a worker crashes on purpose: a test
// hook for the crash handling of CepheusWorker.
const workerCrashEnv = "DIFFTEST_WORKER_CRASH_ON"

// workerStack bounds a worker's goroutine stacks, so that a runaway
// recursion fails in a second rather than after growing to 1 GB.
const workerStack = 64 << 20

// CepheusWorker runs the inputs through Cepheus like [Cepheus], but in
// child processes of the executable exe, which must call
// [MaybeServeWorker] at the start of main. The child reads the case files
// of dir (the inputs, written there for Flink) and writes one result line
// per case as it goes. When a child dies (a fatal error that no recover
// catches), the case it was running gets an error result that says so,
// and a new child carries on with the cases after it.
func CepheusWorker(ctx context.Context, exe, dir string, inputs []conformance.Input, caseTimeout time.Duration) (*conformance.Results, error) {
	rs := &conformance.Results{Cases: make(map[string]*conformance.Result, len(inputs))}
	for attempt := 0; len(rs.Cases) < len(inputs); attempt++ {
		if attempt > len(inputs) {
			return nil, fmt.Errorf("difftest: cepheus worker: no progress")
		}
		skip := filepath.Join(dir, fmt.Sprintf("worker-%d.skip", attempt))
		var ids []string
		for id := range rs.Cases {
			ids = append(ids, id)
		}
		if err := os.WriteFile(skip, []byte(strings.Join(ids, "\n")), 0o644); err != nil {
			return nil, fmt.Errorf("difftest: %w", err)
		}
		out := filepath.Join(dir, fmt.Sprintf("worker-%d.results", attempt))
		cmd := exec.CommandContext(ctx, exe)
		spec, err := json.Marshal(workerSpec{Dir: dir, Skip: skip, Out: out, CaseTimeout: caseTimeout.String()})
		if err != nil {
			return nil, err
		}
		cmd.Env = append(os.Environ(), WorkerEnv+"="+string(spec))
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		runErr := cmd.Run()
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		got, last, err := readWorkerResults(out)
		if err != nil {
			return nil, err
		}
		for id, r := range got {
			rs.Cases[id] = r
		}
		if runErr == nil {
			break
		}
		// The child died: the case it had started last has no result.
		if last == "" || rs.Cases[last] != nil {
			return nil, fmt.Errorf("difftest: cepheus worker failed outside a case: %v\n%s", runErr, tail(stderr.String(), 2000))
		}
		msg := "cepheus crashed: " + firstLine(stderr.String(), runErr.Error())
		rs.Cases[last] = &conformance.Result{Error: &msg}
	}
	return throughFile(rs)
}

// MaybeServeWorker serves as a Cepheus worker and exits when the process
// was started as one by [CepheusWorker]; otherwise it returns at once.
func MaybeServeWorker() {
	spec, ok := os.LookupEnv(WorkerEnv)
	if !ok {
		return
	}
	if err := serveWorker(spec); err != nil {
		fmt.Fprintln(os.Stderr, "difftest worker:", err)
		os.Exit(2)
	}
	os.Exit(0)
}

// workerSpec is what a worker is told, as JSON in WorkerEnv.
type workerSpec struct {
	Dir         string `json:"dir"`          // the case files
	Skip        string `json:"skip"`         // a file of case ids to skip, one a line
	Out         string `json:"out"`          // the result lines to write
	CaseTimeout string `json:"case_timeout"` // a time.Duration
}

func serveWorker(specJSON string) error {
	var spec workerSpec
	if err := json.Unmarshal([]byte(specJSON), &spec); err != nil {
		return fmt.Errorf("bad %s: %w", WorkerEnv, err)
	}
	dir, skipPath, out := spec.Dir, spec.Skip, spec.Out
	caseTimeout, err := time.ParseDuration(spec.CaseTimeout)
	if err != nil {
		return err
	}
	debug.SetMaxStack(workerStack)
	cases, err := conformance.LoadDir(dir)
	if err != nil {
		return err
	}
	b, err := os.ReadFile(skipPath)
	if err != nil {
		return err
	}
	skip := map[string]bool{}
	for _, id := range strings.Split(string(b), "\n") {
		skip[id] = true
	}
	f, err := os.Create(out)
	if err != nil {
		return err
	}
	defer f.Close()
	enc := json.NewEncoder(f)
	crashOn := os.Getenv(workerCrashEnv)
	for i := range cases {
		in := &cases[i].Input
		if skip[in.ID] {
			continue
		}
		// The start line is written (unbuffered) before the case runs, so
		// that the parent knows which case a crash belongs to.
		if err := enc.Encode(workerLine{Start: in.ID}); err != nil {
			return err
		}
		if in.ID == crashOn {
			// An unrecovered panic ends the process, as a fatal error would.
			panic("difftest: crash requested by " + workerCrashEnv)
		}
		r := runWithTimeout(in, caseTimeout)
		if err := enc.Encode(workerLine{ID: in.ID, Result: r}); err != nil {
			return err
		}
	}
	return f.Close()
}

// workerLine is one line of a worker's results: a case started, or its
// result.
type workerLine struct {
	Start  string              `json:"start,omitempty"`
	ID     string              `json:"id,omitempty"`
	Result *conformance.Result `json:"result,omitempty"`
}

// readWorkerResults reads a worker's result lines: the results, and the
// case started last (with or without a result).
func readWorkerResults(path string) (map[string]*conformance.Result, string, error) {
	out := map[string]*conformance.Result{}
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return out, "", nil
	}
	if err != nil {
		return nil, "", fmt.Errorf("difftest: %w", err)
	}
	last := ""
	dec := json.NewDecoder(bytes.NewReader(b))
	for {
		var l workerLine
		if err := dec.Decode(&l); err != nil {
			// io.EOF, or a line cut short by a crash.
			break
		}
		if l.Start != "" {
			last = l.Start
		}
		if l.ID != "" && l.Result != nil {
			out[l.ID] = l.Result
		}
	}
	return out, last, nil
}

// firstLine returns the first line of s that says what went wrong, or def.
func firstLine(s, def string) string {
	for _, l := range strings.Split(s, "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "runtime:") {
			return l
		}
	}
	return def
}

func tail(s string, n int) string {
	if len(s) > n {
		return "..." + s[len(s)-n:]
	}
	return s
}

// throughFile writes rs in the results file format and reads it back, so
// that results are compared as a results file states them.
func throughFile(rs *conformance.Results) (*conformance.Results, error) {
	var b bytes.Buffer
	if _, err := rs.WriteTo(&b); err != nil {
		return nil, fmt.Errorf("difftest: write results: %w", err)
	}
	back, err := conformance.DecodeResults(b.Bytes())
	if err != nil {
		return nil, fmt.Errorf("difftest: read results back: %w", err)
	}
	return back, nil
}

func runWithTimeout(in *conformance.Input, timeout time.Duration) *conformance.Result {
	done := make(chan *conformance.Result, 1)
	go func() { done <- conformance.RunCase(in) }()
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case r := <-done:
		return r
	case <-t.C:
		msg := fmt.Sprintf("timeout: case still running after %v", timeout)
		return &conformance.Result{Error: &msg}
	}
}
