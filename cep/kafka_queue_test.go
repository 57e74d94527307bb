package cep

import (
	goruntime "runtime"
	"sync"
	"testing"
	"time"

	"github.com/cepheus-cep/cepheus/runtime"
)

// fetcher stands for a Kafka partition's fetching: it hands batches
// while not paused. Its pause and resume yield first, so that the other
// side of the queue runs in between, as a real source's client call
// lets it.
type fetcher struct {
	mu     sync.Mutex
	cond   *sync.Cond
	paused bool
}

func (f *fetcher) set(paused bool) {
	goruntime.Gosched()
	f.mu.Lock()
	f.paused = paused
	f.cond.Broadcast()
	f.mu.Unlock()
}

// waitRunning waits until f is not paused, false after 5 s paused.
func (f *fetcher) waitRunning() bool {
	deadline := time.Now().Add(5 * time.Second)
	f.mu.Lock()
	defer f.mu.Unlock()
	for f.paused {
		if time.Now().After(deadline) {
			return false
		}
		f.cond.Wait()
	}
	return true
}

// TestPartQueuePauseResumeOrder: a partition's queue pauses the fetching
// when full and resumes it when short; however the two sides interleave,
// the fetching is never left paused while the queue is empty (CI hung on
// that: the pause of a full queue reached the source after the resume of
// the pop that had emptied it).
func TestPartQueuePauseResumeOrder(t *testing.T) {
	const n = 200000
	f := &fetcher{}
	f.cond = sync.NewCond(&f.mu)
	q := newPartQueue()
	// Wake waiters now and then so that they see the deadline.
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		for {
			select {
			case <-stop:
				return
			case <-time.After(50 * time.Millisecond):
				f.mu.Lock()
				f.cond.Broadcast()
				f.mu.Unlock()
			}
		}
	}()
	stuck := make(chan int, 1)
	go func() {
		defer q.close()
		for i := range n {
			if !f.waitRunning() {
				stuck <- i
				return
			}
			q.push(runtime.Batch{End: runtime.Position{Offset: int64(i)}}, func() { f.set(true) })
		}
	}()
	got := 0
	for {
		b, ok := q.pop(func() { f.set(false) })
		if !ok {
			break
		}
		if b.End.Offset != int64(got) {
			t.Fatalf("batch %d came as number %d", b.End.Offset, got)
		}
		got++
	}
	select {
	case i := <-stuck:
		t.Fatalf("the fetching stayed paused with the queue empty, after %d of %d batches", i, n)
	default:
	}
	if got != n {
		t.Fatalf("%d batches came out of %d", got, n)
	}
}
