package runtime

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"
)

// followReader reads a file that may grow: at its end it does not return
// io.EOF but waits, polling every poll, until the file has more bytes or
// ctx is done (then it returns ctx's error). Under a [FileSource] this
// gives follow mode its rule for free: a line is returned only once its
// newline has arrived, because the source's buffered reader waits for the
// newline, and a partial last line stays in its buffer, never decoded.
//
// A file that has had nothing new for quietPolls polls is looked at only
// every quietFactor polls ([followReader.pollAfter]): a followed directory
// keeps every file it has seen as a partition, and most of them (rotated
// files, yesterday's) never grow again; at the default 100ms, a file quiet
// for 10 s is looked at every second, so that a directory of a thousand
// such files costs a hundred looks a second instead of ten thousand.
//
// Before it waits, it calls wait once (per stretch of waiting), so that
// the records read so far are delivered and the consumer hears that the
// reader is caught up. A file that shrinks below what was read (truncated
// in place) is an error: its lines would be lost or read twice.
//
// With closeAfter set (the files of a followed directory), a file that has
// had nothing new for that long of polling returns [errInactive], and
// keeps returning it: its reader closes it and hands it to the directory
// scan ([PartitionReader.watchDir]), which opens it again once it grows
// past offset. info and offset are then the file as it was last looked at
// and the bytes read of it.
type followReader struct {
	ctx  context.Context
	f    *os.File
	poll time.Duration
	wait func() error
	// hold, while set, makes the end of the file an io.EOF (used while a
	// resume discards up to its position: a file too short is an error,
	// not something to wait for).
	hold bool
	// quiet counts the polls since the file last had something new.
	quiet int
	// sleep waits between polls; nil: sleepCtx (a test's hook).
	sleep func(context.Context, time.Duration) error
	// closeAfter, when positive, is how long a file may have nothing new
	// before Read returns errInactive; quietFor is the time waited since
	// it last had something new.
	closeAfter, quietFor time.Duration
	// caughtUpOnce: the reader reached the file's end since it opened it
	// (Batch.Unmodified is of the first time alone).
	caughtUpOnce bool
	// info, offset and tail, set when Read returned errInactive, are the
	// file's last stat, the bytes read of it and the last of them
	// (closedFile.tail).
	info   os.FileInfo
	offset int64
	tail   []byte
}

// errInactive is the error of a followed file with nothing new for its
// reader's closeAfter: not a failure, the reader closes the file.
var errInactive = errors.New("runtime: source: inactive")

// quietPolls and quietFactor: after quietPolls polls that found nothing
// new, a followed file is polled every quietFactor polls.
const quietPolls, quietFactor = 100, 10

// pollAfter is how long to wait before looking at the file again after
// quiet polls that found nothing new.
func (r *followReader) pollAfter(quiet int) time.Duration {
	if quiet >= quietPolls {
		return quietFactor * r.poll
	}
	return r.poll
}

func (r *followReader) Read(p []byte) (int, error) {
	if r.info != nil {
		return 0, errInactive
	}
	waited := false
	for {
		n, err := r.f.Read(p)
		if n > 0 || len(p) == 0 {
			r.quiet, r.quietFor = 0, 0
			return n, nil
		}
		if err != io.EOF {
			return 0, err
		}
		if r.hold {
			return 0, io.EOF
		}
		if !waited {
			waited = true
			if err := r.wait(); err != nil {
				return 0, err
			}
		}
		sleep := r.sleep
		if sleep == nil {
			sleep = sleepCtx
		}
		d := r.pollAfter(r.quiet)
		if err := sleep(r.ctx, d); err != nil {
			return 0, err
		}
		r.quiet++
		r.quietFor += d
		fi, err := r.f.Stat()
		if err != nil {
			return 0, err
		}
		read, err := r.f.Seek(0, io.SeekCurrent)
		if err != nil {
			return 0, err
		}
		if fi.Size() < read {
			return 0, errTruncated(fi.Size(), read)
		}
		if r.closeAfter > 0 && r.quietFor >= r.closeAfter && fi.Size() == read {
			r.info, r.offset, r.tail = fi, read, readTail(r.f, read)
			return 0, errInactive
		}
		if r.closeAfter <= 0 && r.quiet >= quietPolls && fi.Size() == read {
			if err := r.checkName(fi); err != nil {
				return 0, err
			}
		}
	}
}

// checkName returns an error when the name the file was opened by holds
// another file now, fi being the file's own: a file that is never
// closed (a followed single file, or a directory's without
// CloseInactive), quiet, and renamed away with another created under its
// name (logrotate's create), which its descriptor would never see: the
// run would stand still without a word. A file closed for quiet is
// checked at its scan instead (closedFile.check); one deleted, with no
// file under the name, is read on.
func (r *followReader) checkName(fi os.FileInfo) error {
	now, err := os.Stat(r.f.Name())
	if err != nil || os.SameFile(now, fi) {
		return nil
	}
	return fmt.Errorf("replaced by another file while followed: another file has taken its name (a rotation?), and the file read, renamed away or deleted, has had nothing new for %d polls; the new file cannot be read on from the old one's position. Follow a directory instead, and give each new file a new name: each is a partition of its own",
		r.quiet)
}

// errTruncated is the error of a followed file of size bytes of which
// read were read.
func errTruncated(size, read int64) error {
	return fmt.Errorf("truncated while followed (%d bytes, %d read)", size, read)
}

// sleepCtx waits d, or until ctx is done (then it returns ctx's error).
func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// pumpChunk is the size of the reads of a stream pump.
const pumpChunk = 64 << 10

// streamPump reads a stream that may block without end (standard input)
// in a goroutine of its own, so that the partition's reader, which reads
// the chunks through Read, can still stop when its context is done: a
// blocked read of a terminal or a pipe cannot be interrupted in general.
// When the stream has SetReadDeadline (a pipe or a socket as an *os.File),
// stop unblocks the pump at once; otherwise the pump goroutine ends when
// its pending read returns, and sends nothing after stop.
type streamPump struct {
	ctx    context.Context
	src    io.Reader
	chunks chan pumpResult
	free   chan []byte
	wait   func() error
	chunk  []byte // the chunk being read (its whole buffer)
	cur    []byte // its unread rest
	err    error  // sticky
}

type pumpResult struct {
	b   []byte
	err error
}

func newStreamPump(ctx context.Context, src io.Reader, wait func() error) *streamPump {
	p := &streamPump{
		ctx: ctx, src: src, wait: wait,
		chunks: make(chan pumpResult, 1),
		free:   make(chan []byte, 2),
	}
	p.free <- make([]byte, pumpChunk)
	p.free <- make([]byte, pumpChunk)
	go p.run()
	return p
}

// run is the pump goroutine: it reads chunks into free buffers and hands
// them over, until an error or until ctx is done.
func (p *streamPump) run() {
	for {
		var buf []byte
		select {
		case buf = <-p.free:
		case <-p.ctx.Done():
			return
		}
		if p.ctx.Err() != nil {
			return // a free buffer and ctx were both ready
		}
		n, err := p.src.Read(buf)
		select {
		case p.chunks <- pumpResult{buf[:n], err}:
		case <-p.ctx.Done():
			return
		}
		if err != nil {
			return
		}
	}
}

// stop unblocks the pump's read if the stream allows it (ctx, already
// done, keeps it from sending anything more).
func (p *streamPump) stop() {
	if d, ok := p.src.(interface{ SetReadDeadline(time.Time) error }); ok {
		d.SetReadDeadline(time.Now())
	}
}

func (p *streamPump) Read(b []byte) (int, error) {
	for len(p.cur) == 0 {
		if p.err != nil {
			return 0, p.err
		}
		var res pumpResult
		select {
		case res = <-p.chunks:
		default:
			// Nothing has arrived: deliver what was read before waiting.
			if err := p.wait(); err != nil {
				return 0, err
			}
			select {
			case res = <-p.chunks:
			case <-p.ctx.Done():
				return 0, p.ctx.Err()
			}
		}
		if res.err != nil {
			p.err = res.err
		}
		if len(res.b) == 0 {
			p.recycle(res.b)
			continue
		}
		p.chunk, p.cur = res.b, res.b
	}
	n := copy(b, p.cur)
	p.cur = p.cur[n:]
	if len(p.cur) == 0 {
		p.recycle(p.chunk)
		p.chunk = nil
	}
	return n, nil
}

// recycle gives a chunk's buffer back to the pump.
func (p *streamPump) recycle(b []byte) {
	select {
	case p.free <- b[:cap(b)]:
	default:
	}
}

// gzipMembers decompresses a gzip stream member by member. A gzip.Reader
// in multistream mode reads the next member's header before it returns the
// end of the current member, which in a followed file holds the member's
// last lines until the writer starts the next one; here the end of a
// member returns what it had, and the next header is read by the next
// Read.
//
// After a member, the end of the input is the end of the stream, and bytes
// that do not start with the gzip magic are [errTrailingData]: the
// multistream reader called them a truncated member ("unexpected EOF",
// under 10 bytes) or an invalid header, which sent the reader of a file
// with trailing garbage or zero padding looking for a cut.
type gzipMembers struct {
	br      *bufio.Reader
	z       *gzip.Reader
	members int  // members begun
	next    bool // the current member ended: read the next header first
}

// errTrailingData is the error of bytes after a gzip member that start no
// other member.
var errTrailingData = errors.New("the input holds bytes that start no gzip member (trailing garbage)")

func (g *gzipMembers) Read(p []byte) (int, error) {
	for {
		if g.z == nil || g.next {
			if err := g.nextMember(); err != nil {
				return 0, err
			}
		}
		n, err := g.z.Read(p)
		if err == io.EOF {
			g.next = true
			if n == 0 {
				continue
			}
			err = nil
		}
		return n, err
	}
}

// nextMember reads the header of the next member.
func (g *gzipMembers) nextMember() error {
	if g.members > 0 {
		magic, err := g.br.Peek(len(gzipMagic))
		switch {
		case len(magic) == 0 && err == io.EOF:
			return io.EOF
		case err != nil && err != io.EOF:
			return err
		case !bytes.Equal(magic, gzipMagic):
			return fmt.Errorf("after gzip member %d %w", g.members, errTrailingData)
		}
	}
	var err error
	if g.z == nil {
		g.z, err = gzip.NewReader(g.br)
	} else {
		err = g.z.Reset(g.br)
	}
	if err != nil {
		return err
	}
	g.z.Multistream(false)
	g.members++
	g.next = false
	return nil
}
