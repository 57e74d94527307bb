package main

import (
	"context"
	"io"
	"os"
)

// ctxReader reads r in a goroutine of its own, so that a Read waiting for
// input returns ctx's error once ctx is done: a command reading standard
// input that nothing writes (a pipe whose writer idles) stops on Ctrl-C
// at once, not at the writer's next line or its end. The goroutine reads
// only when a Read asks for more, into one buffer, and stays blocked in
// r's Read after ctx is done until r returns (the process is ending).
type ctxReader struct {
	ctx     context.Context
	ask     chan struct{}
	got     chan readResult
	asked   bool   // a read is under way in the goroutine
	pending []byte // what the last read got that Read has not passed on
	err     error  // the last read's error, passed on once pending is
}

type readResult struct {
	b   []byte
	err error
}

func newCtxReader(ctx context.Context, r io.Reader) *ctxReader {
	c := &ctxReader{ctx: ctx, ask: make(chan struct{}, 1), got: make(chan readResult, 1)}
	go func() {
		buf := make([]byte, 64<<10)
		for range c.ask {
			n, err := r.Read(buf)
			c.got <- readResult{buf[:n], err}
			if err != nil {
				return
			}
		}
	}()
	return c
}

// Read passes on what the goroutine's reads got. A Read into an empty p
// returns 0, nil at once (io.Reader), starting no read of r: one could
// wait for input that p has no room for.
func (c *ctxReader) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	for len(c.pending) == 0 {
		if c.err != nil {
			return 0, c.err
		}
		if !c.asked {
			c.ask <- struct{}{}
			c.asked = true
		}
		select {
		case res := <-c.got:
			c.asked = false
			c.pending, c.err = res.b, res.err
		case <-c.ctx.Done():
			return 0, c.ctx.Err()
		}
	}
	n := copy(p, c.pending)
	c.pending = c.pending[n:]
	return n, nil
}

// stdinReader returns standard input to read until ctx is done: through
// a [ctxReader], or os.Stdin itself when it is a regular file (< FILE),
// whose reads do not wait for a writer, and whose size a source then
// knows (backtest's progress line gives how far it has read).
func stdinReader(ctx context.Context) io.Reader {
	if st, err := os.Stdin.Stat(); err == nil && st.Mode().IsRegular() {
		return os.Stdin
	}
	return newCtxReader(ctx, os.Stdin)
}
