package enrich

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net"
	"os"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/cepheus-cep/cepheus/event"
)

// redisAddr returns the address (host:port) of the Redis of
// CEPHEUS_REDIS_ADDR. When it is unset the test fails under CI (make test
// starts a server and sets it, and a test whose server is missing must fail
// there, not skip) and skips elsewhere, saying how to get one.
func redisAddr(t testing.TB) string {
	t.Helper()
	addr := os.Getenv("CEPHEUS_REDIS_ADDR")
	if addr == "" {
		if ci := os.Getenv("CI"); ci != "" && ci != "false" && ci != "0" {
			t.Fatal("CEPHEUS_REDIS_ADDR is not set and CI is: make test starts Redis with scripts/redis.sh")
		}
		t.Skip("no Redis: run scripts/redis.sh start and set CEPHEUS_REDIS_ADDR to the host:port it prints")
	}
	return addr
}

var prefixSeq atomic.Int64

// testPrefix returns a key prefix that no other test or run uses, made of
// t.Name(), and deletes the keys under it at the end of the test.
func testPrefix(t testing.TB, addr string) string {
	name := regexp.MustCompile(`[^a-zA-Z0-9_-]+`).ReplaceAllString(t.Name(), "-")
	prefix := fmt.Sprintf("cepheus:test:%s:%d-%d:", name, time.Now().UnixNano(), prefixSeq.Add(1))
	t.Cleanup(func() {
		c := redis.NewClient(&redis.Options{Addr: addr})
		defer c.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		iter := c.Scan(ctx, 0, prefix+"*", 1000).Iterator()
		var keys []string
		for iter.Next(ctx) {
			keys = append(keys, iter.Val())
		}
		for len(keys) > 0 {
			n := min(len(keys), 1000)
			c.Del(ctx, keys[:n]...)
			keys = keys[n:]
		}
	})
	return prefix
}

// rawClient returns a go-redis client of addr for setting up a test.
func rawClient(t testing.TB, addr string) *redis.Client {
	c := redis.NewClient(&redis.Options{Addr: addr})
	t.Cleanup(func() { c.Close() })
	return c
}

// randomFile writes a lookup file of fileSpec with n random lines (fixed
// seed): keys of strings and numbers, repeated keys, every kind of value,
// nulls, missing members, a line without fields. It returns the path and
// the keys (as KeyOf builds them) of the file.
func randomFile(t testing.TB, n int) (string, []string) {
	rng := rand.New(rand.NewPCG(7, 11))
	var b strings.Builder
	var keys []string
	strs := []string{"", "DE", "a|b", `quote " and \ backslash`, "ünïcödé", "line\nbreak", strings.Repeat("x", 300)}
	for i := range n {
		line := map[string]any{}
		switch r := rng.IntN(10); {
		case r == 0:
			line["customer_id"] = int64(i)
			keys = append(keys, fmt.Sprint(i))
		case r == 1 && len(keys) > 0:
			k := keys[rng.IntN(len(keys))] // a key again: the later line wins
			line["customer_id"] = k
		default:
			k := fmt.Sprintf("C%d", i)
			line["customer_id"] = k
			keys = append(keys, k)
		}
		// Each field: missing, null or a value.
		field := func(name string, v func() any) {
			switch rng.IntN(5) {
			case 0:
			case 1:
				line[name] = nil
			default:
				line[name] = v()
			}
		}
		field("country", func() any { return strs[rng.IntN(len(strs))] })
		field("tenure", func() any {
			if rng.IntN(4) == 0 {
				return fmt.Sprint(rng.Int64N(1e6)) // an integer in a string
			}
			return rng.Int64() - math.MaxInt64/2
		})
		field("score", func() any {
			return []float64{0, -1.5, 1e-300, 6.02e23, rng.NormFloat64(), float64(rng.IntN(100))}[rng.IntN(6)]
		})
		field("vip", func() any { return rng.IntN(2) == 0 })
		field("since", func() any {
			ms := 1_600_000_000_000 + rng.Int64N(1e11)
			if rng.IntN(2) == 0 {
				return ms
			}
			return time.UnixMilli(ms).In(time.FixedZone("", 3600)).Format(time.RFC3339Nano)
		})
		if rng.IntN(20) == 0 {
			line["ignored"] = map[string]any{"x": 1}
		}
		data, err := json.Marshal(line)
		if err != nil {
			t.Fatal(err)
		}
		b.Write(data)
		b.WriteByte('\n')
		if i%97 == 0 {
			b.WriteString("\n") // blank lines are skipped
		}
	}
	// A record without fields.
	b.WriteString(`{"customer_id":"bare"}` + "\n")
	keys = append(keys, "bare")
	return writeFile(t, "customers.jsonl", b.String()), keys
}

// lineCount is the number of non-blank lines of the file at path.
func lineCount(t testing.TB, path string) int {
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for l := range strings.SplitSeq(string(data), "\n") {
		if strings.TrimSpace(l) != "" {
			n++
		}
	}
	return n
}

// fetchAll fetches keys from src in requests of 300.
func fetchAll(t testing.TB, src Source, keys []string) [][]event.Value {
	t.Helper()
	var out [][]event.Value
	for len(keys) > 0 {
		n := min(len(keys), 300)
		recs, err := src.Fetch(t.Context(), keys[:n])
		if err != nil {
			t.Fatalf("%s: %v", src, err)
		}
		out = append(out, recs...)
		keys = keys[n:]
	}
	return out
}

// TestRedisLoadFetch loads a random file into Redis in each format and
// checks that Redis gives, key by key, the records OpenFile gives.
func TestRedisLoadFetch(t *testing.T) {
	addr := redisAddr(t)
	path, keys := randomFile(t, 3000)
	fs, err := OpenFile(fileSpec(), path)
	if err != nil {
		t.Fatal(err)
	}
	keys = append(keys, "absent", "C-1", "")
	want := fetchAll(t, fs, keys)
	for _, format := range []string{FormatHash, FormatJSON} {
		t.Run(format, func(t *testing.T) {
			cfg := RedisConfig{Addr: addr, Format: format, Prefix: testPrefix(t, addr)}
			done, err := Load(t.Context(), fileSpec(), path, cfg)
			if err != nil {
				t.Fatal(err)
			}
			if lines := lineCount(t, path); done.Records != lines {
				t.Errorf("Load wrote %d records, want one per line, %d", done.Records, lines)
			}
			// The file repeats keys: Load counts them as OpenFile does.
			if done.Keys != fs.Len() || done.Keys >= done.Records || done.Duplicates != fs.Duplicates() {
				t.Errorf("Load: %d keys, duplicates %+v; want the file's %d keys (fewer than its %d records) and duplicates %+v",
					done.Keys, done.Duplicates, fs.Len(), done.Records, fs.Duplicates())
			}
			rs, err := OpenRedis(fileSpec(), cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer rs.Close()
			if err := rs.Ping(t.Context()); err != nil {
				t.Fatal(err)
			}
			got := fetchAll(t, rs, keys)
			found := 0
			for i, k := range keys {
				if !equalRecords(got[i], want[i]) {
					t.Errorf("key %q: redis %s, file %s", k, fmtRecord(got[i]), fmtRecord(want[i]))
				}
				if want[i] != nil {
					found++
				}
			}
			if found != fs.Len() {
				t.Errorf("%d keys found, the file has %d records", found, fs.Len())
			}
		})
	}
}

// TestRedisLookupMatchesFile runs the same random batches through a Lookup
// over the file and one over Redis, and compares the events.
func TestRedisLookupMatchesFile(t *testing.T) {
	addr := redisAddr(t)
	spec := fileSpec()
	spec.Fields[0].Default = event.String("??")
	spec.Fields[1].Default = event.Int(-1)
	spec.Fields[3].Default = event.Bool(false)
	path, keys := randomFile(t, 2000)
	fs, err := OpenFile(spec, path)
	if err != nil {
		t.Fatal(err)
	}
	slots := []int{1, 2, 3, 4, 5}
	for _, format := range []string{FormatHash, FormatJSON} {
		t.Run(format, func(t *testing.T) {
			cfg := RedisConfig{Addr: addr, Format: format, Prefix: testPrefix(t, addr)}
			if _, err := Load(t.Context(), spec, path, cfg); err != nil {
				t.Fatal(err)
			}
			rs, err := OpenRedis(spec, cfg)
			if err != nil {
				t.Fatal(err)
			}
			mk := func(src Source) *Lookup {
				return newLookup(t, LookupConfig{Spec: spec, KeySlots: []int{0}, Slots: slots, Source: src,
					Batch: 64, Timeout: 5 * time.Second, Policy: Policy{Mode: FailClosed}})
			}
			overFile, overRedis := mk(fs), mk(rs)
			rng := rand.New(rand.NewPCG(3, 5))
			for batch := range 20 {
				var a, b []*event.Event
				for range 200 {
					var id event.Value
					switch r := rng.IntN(10); {
					case r < 7:
						id = event.String(keys[rng.IntN(len(keys))])
					case r < 9:
						id = event.String(fmt.Sprintf("absent-%d", rng.IntN(50)))
					}
					a = append(a, &event.Event{Fields: []event.Value{id, {}, {}, {}, {}, {}}})
					b = append(b, &event.Event{Fields: []event.Value{id, {}, {}, {}, {}, {}}})
				}
				// Numeric keys: the events of the file's integer ids carry
				// ints, whose key is the same decimal string.
				for _, ev := range slices.Concat(a, b) {
					if s, ok := ev.Fields[0].AsString(); ok && s != "" && s[0] >= '0' && s[0] <= '9' {
						var i int64
						fmt.Sscan(s, &i)
						ev.Fields[0] = event.Int(i)
					}
				}
				ra, rb := enrich(t, overFile, a), enrich(t, overRedis, b)
				for i := range a {
					if ra[i] != "" || rb[i] != "" {
						t.Fatalf("batch %d event %d rejected: file %q, redis %q", batch, i, ra[i], rb[i])
					}
					if !equalRecords(a[i].Fields, b[i].Fields) {
						t.Errorf("batch %d event %d: file %s, redis %s", batch, i, fmtRecord(a[i].Fields), fmtRecord(b[i].Fields))
					}
				}
			}
			sa, sb := overFile.Stats(), overRedis.Stats()
			if sa.Hits != sb.Hits || sa.Misses != sb.Misses || sa.NotFound != sb.NotFound || sb.Requests == 0 {
				t.Errorf("stats differ:\n file  %+v\n redis %+v", sa, sb)
			}
			if sb.Failures != 0 || sb.Latency.Count != sb.Requests {
				t.Errorf("redis stats %+v: failures, or latencies not of every request", sb)
			}
		})
	}
}

// closedPort returns a loopback address on which nothing listens.
func closedPort(t testing.TB) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// TestRedisUnreachable checks that a Redis that is down fails each request,
// which the Policy then handles, and that no password shows. It needs no
// server.
func TestRedisUnreachable(t *testing.T) {
	addr := closedPort(t)
	const password = "hunter2-secret"
	for _, mode := range []Mode{FailOpen, FailClosed} {
		t.Run(mode.String(), func(t *testing.T) {
			rs, err := OpenRedis(customerSpec(), RedisConfig{Addr: addr, Username: "cep", Password: password})
			if err != nil {
				t.Fatal(err)
			}
			err = rs.Ping(t.Context())
			if err == nil || !strings.Contains(err.Error(), addr) || strings.Contains(err.Error(), password) {
				t.Errorf("Ping: %v, want an error naming %s, without the password", err, addr)
			}
			cfg := customerConfig(rs)
			cfg.Policy = Policy{Mode: mode, Retries: 1}
			cfg.Timeout = time.Second
			l := newLookup(t, cfg)
			evs := events("C1", "C2", "C1", "")
			reasons := make([]string, len(evs))
			start := time.Now()
			if err := l.Enrich(t.Context(), evs, reasons); err != nil {
				t.Fatalf("Enrich: %v, want nil", err)
			}
			// go-redis's own dial retries (5 by default, 100ms apart) would
			// take 400ms per attempt.
			if d := time.Since(start); d > 300*time.Millisecond {
				t.Errorf("Enrich took %v: a refused connection should fail at once", d)
			}
			checkFields(t, evs[3:], defaultsWant)
			prefix := "lookup customer: redis://cep:***@" + addr + "/0?format=hash: "
			// The stats say why, without the password (nor the attempts,
			// each failed for itself).
			refused := "dial tcp " + addr + ": connect: connection refused"
			switch mode {
			case FailOpen:
				checkFields(t, evs, defaultsWant, defaultsWant, defaultsWant, defaultsWant)
				checkStats(t, l.Stats(), Stats{Misses: 2, Requests: 2, Failures: 2, Defaulted: 3, LastError: refused})
			case FailClosed:
				for i, r := range reasons[:3] {
					if !strings.HasPrefix(r, prefix) || !strings.Contains(r, "(2 attempts)") ||
						strings.Contains(r, password) || strings.Contains(r, "\n") {
						t.Errorf("reason %d %q: want one line starting %q, with the attempts, without the password", i, r, prefix)
					}
				}
				checkStats(t, l.Stats(), Stats{Misses: 2, Requests: 2, Failures: 2, Rejected: 3, LastError: refused})
				t.Logf("reason: %s", reasons[0])
			}
		})
	}
}

// TestRedisClosedWithoutReply: a server that closes the connection at the
// first command without a reply, as a Redis that speaks only TLS does to
// a client without it, fails Ping and Load with an error that says so, not
// a bare "EOF"; a client with TLS gets no such hint. It needs no server.
func TestRedisClosedWithoutReply(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Read(make([]byte, 512))
			c.Close()
		}
	}()
	const hint = "EOF (the server closed the connection without a reply, as one that speaks only TLS does: then use rediss:// or -redis-tls)"
	path, _ := randomFile(t, 10)
	for _, tls := range []bool{false, true} {
		t.Run(fmt.Sprintf("tls=%v", tls), func(t *testing.T) {
			cfg := RedisConfig{Addr: ln.Addr().String(), TLS: tls, Password: "hunter2-secret"}
			rs, err := OpenRedis(customerSpec(), cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer rs.Close()
			pingErr := rs.Ping(t.Context())
			_, loadErr := Load(t.Context(), fileSpec(), path, cfg)
			for _, c := range []struct {
				what string
				err  error
			}{{"Ping", pingErr}, {"Load", loadErr}} {
				if c.err == nil || strings.Contains(c.err.Error(), cfg.Password) {
					t.Fatalf("%s: %v, want an error without the password", c.what, c.err)
				}
				if got := strings.Contains(c.err.Error(), hint); got == tls {
					t.Errorf("%s: %v; the hint %q given: %v, want %v", c.what, c.err, hint, got, !tls)
				}
			}
		})
	}
}

// TestRedisBadRecords checks that a record that does not convert fails its
// key alone, with a reason naming the key (the other key of the request,
// C2, has no record: the defaults), a key of the wrong type (a string read
// as a hash, a hash read as a JSON string) too, saying which format reads it.
func TestRedisBadRecords(t *testing.T) {
	addr := redisAddr(t)
	c := rawClient(t, addr)
	ctx := t.Context()
	for _, tc := range []struct {
		format string
		setup  func(prefix string) error
		want   string // after "lookup customer: SOURCE: key PREFIXC1: "
	}{
		{FormatHash, func(p string) error { return c.HSet(ctx, p+"C1", "tenure_days", "abc").Err() },
			`hash field tenure_days: want an integer, got "abc"`},
		{FormatHash, func(p string) error { return c.Set(ctx, p+"C1", "a string", 0).Err() },
			"WRONGTYPE Operation against a key holding the wrong kind of value (not a hash: records written as JSON strings are read with ?format=json)"},
		{FormatJSON, func(p string) error { return c.Set(ctx, p+"C1", `{"tenure_days":1.5}`, 0).Err() },
			"field tenure_days: want an integer, got 1.5"},
		{FormatJSON, func(p string) error { return c.Set(ctx, p+"C1", `nope`, 0).Err() },
			"not a JSON object: nope"},
		// A hash read with ?format=json (records loaded without it) is
		// told, not taken for a missing record.
		{FormatJSON, func(p string) error { return c.HSet(ctx, p+"C1", "home_country", "DE").Err() },
			"WRONGTYPE Operation against a key holding the wrong kind of value (not a string: records written as hashes, as enrich load writes them without ?format=json, are read without it)"},
	} {
		t.Run(tc.format, func(t *testing.T) {
			cfg := RedisConfig{Addr: addr, Format: tc.format, Prefix: testPrefix(t, addr)}
			if err := tc.setup(cfg.Prefix); err != nil {
				t.Fatal(err)
			}
			rs, err := OpenRedis(customerSpec(), cfg)
			if err != nil {
				t.Fatal(err)
			}
			lc := customerConfig(rs)
			lc.Policy = Policy{Mode: FailClosed}
			l := newLookup(t, lc)
			reasons := enrich(t, l, events("C1", "C2"))
			want := fmt.Sprintf("lookup customer: %s: key %sC1: %s", rs, cfg.Prefix, tc.want)
			for i, r := range reasons {
				w := want
				if i == 1 { // C2: no record, the defaults
					w = ""
				}
				if r != w {
					t.Errorf("reason %d:\n got  %q\n want %q", i, r, w)
				}
			}
		})
	}
}

// TestRedisHashExists checks that a hash with none of the lookup's fields
// is a record (all null: the defaults), unlike a missing key.
func TestRedisHashExists(t *testing.T) {
	addr := redisAddr(t)
	cfg := RedisConfig{Addr: addr, Prefix: testPrefix(t, addr)}
	if err := rawClient(t, addr).HSet(t.Context(), cfg.Prefix+"C1", "unrelated", "x").Err(); err != nil {
		t.Fatal(err)
	}
	rs, err := OpenRedis(customerSpec(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer rs.Close()
	got, err := rs.Fetch(t.Context(), []string{"C1", "C2"})
	if err != nil {
		t.Fatal(err)
	}
	if !equalRecords(got[0], []event.Value{event.Null, event.Null, event.Null}) || got[1] != nil {
		t.Errorf("Fetch = %s, %s; want a record of nulls, then none", fmtRecord(got[0]), fmtRecord(got[1]))
	}
}

// TestRedisAuth checks an ACL user's login, and that a wrong password's
// error does not show it, nor a lookup's last error.
func TestRedisAuth(t *testing.T) {
	addr := redisAddr(t)
	c := rawClient(t, addr)
	prefix := testPrefix(t, addr)
	user := strings.TrimSuffix(strings.ReplaceAll(prefix, ":", "-"), "-")
	const password = "correct-horse-battery"
	if err := c.Do(t.Context(), "ACL", "SETUSER", user, "on", ">"+password, "~"+prefix+"*", "+@all").Err(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Do(context.Background(), "ACL", "DELUSER", user) })
	if err := c.HSet(t.Context(), prefix+"C1", "home_country", "DE").Err(); err != nil {
		t.Fatal(err)
	}

	u := fmt.Sprintf("redis://%s:%s@%s/0?prefix=%s", user, password, addr, prefix)
	cfg, err := ParseRedisURL(u)
	if err != nil {
		t.Fatal(err)
	}
	rs, err := OpenRedis(customerSpec(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer rs.Close()
	got, err := rs.Fetch(t.Context(), []string{"C1"})
	if err != nil || got[0] == nil || !got[0][0].Equal(event.String("DE")) {
		t.Errorf("Fetch as %s: %s, %v", user, fmtRecord(got[0]), err)
	}

	cfg.Password = "wrong-password-42"
	bad, err := OpenRedis(customerSpec(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer bad.Close()
	err = bad.Ping(t.Context())
	if err == nil || strings.Contains(err.Error(), cfg.Password) {
		t.Errorf("Ping with a wrong password: %v, want an error without the password", err)
	}
	if _, err := bad.Fetch(t.Context(), []string{"C1"}); err == nil || strings.Contains(err.Error(), cfg.Password) {
		t.Errorf("Fetch with a wrong password: %v, want an error without the password", err)
	}
	// Nor does the last error of a lookup over it.
	src, err := OpenRedis(customerSpec(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	l := newLookup(t, customerConfig(src))
	enrich(t, l, events("C1"))
	if s := l.Stats(); s.Failures != 1 || s.LastError == "" || strings.Contains(s.LastError, cfg.Password) {
		t.Errorf("a lookup with a wrong password: %d failures, last error %q; want 1, an error without the password", s.Failures, s.LastError)
	}
}

// silentServer listens on a loopback port and accepts connections that it
// reads and never answers (a Redis paused with CLIENT PAUSE, or stuck in a
// slow script, as a client sees it), and returns its address.
func silentServer(t testing.TB) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var conns []net.Conn
	var mu sync.Mutex
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			go io.Copy(io.Discard, c)
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	return ln.Addr().String()
}

// TestRedisSilentTimeouts: a server that takes requests and never answers
// makes every attempt a timeout, counted as one and told as one ("no
// answer within 30ms"), in both formats. The connection's own deadline (the
// attempt's, set by go-redis) ends its read as the attempt's context ends:
// whichever of the two is seen first, the attempt timed out. It needs no
// server.
func TestRedisSilentTimeouts(t *testing.T) {
	addr := silentServer(t)
	for _, format := range []string{FormatHash, FormatJSON} {
		t.Run(format, func(t *testing.T) {
			rs, err := OpenRedis(customerSpec(), RedisConfig{Addr: addr, Format: format})
			if err != nil {
				t.Fatal(err)
			}
			cfg := customerConfig(rs)
			cfg.Policy = Policy{Mode: FailClosed, Retries: 2}
			cfg.Timeout = 30 * time.Millisecond
			cfg.CacheSize = -1
			l := newLookup(t, cfg)
			const calls = 5
			for i := range calls {
				reasons := enrich(t, l, events("C1"))
				want := fmt.Sprintf("lookup customer: %s: no answer within 30ms (3 attempts)", rs)
				if reasons[0] != want {
					t.Errorf("call %d: reason %q, want %q", i, reasons[0], want)
				}
			}
			s := l.Stats()
			if s.Requests != 3*calls || s.Failures != s.Requests || s.Timeouts != s.Requests || s.LastError != "no answer within 30ms" {
				t.Errorf("stats: %d requests, %d failures, %d timeouts, last error %q; want %d of each, the last \"no answer within 30ms\"",
					s.Requests, s.Failures, s.Timeouts, s.LastError, 3*calls)
			}
		})
	}
}

// TestRedisJSONReplyError: with ?format=json a server's refusal of one key
// (NOPERM: an ACL user without access to it) fails the request naming that
// key, though a key before it has no record (redis.Nil, the pipeline's
// first error).
func TestRedisJSONReplyError(t *testing.T) {
	addr := redisAddr(t)
	c := rawClient(t, addr)
	prefix := testPrefix(t, addr)
	user := strings.TrimSuffix(strings.ReplaceAll(prefix, ":", "-"), "-")
	const password = "json-reply-error"
	if err := c.Do(t.Context(), "ACL", "SETUSER", user, "on", ">"+password, "~"+prefix+"C1", "+@all").Err(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Do(context.Background(), "ACL", "DELUSER", user) })
	rs, err := OpenRedis(customerSpec(), RedisConfig{Addr: addr, Username: user, Password: password, Format: FormatJSON, Prefix: prefix})
	if err != nil {
		t.Fatal(err)
	}
	defer rs.Close()
	_, err = rs.Fetch(t.Context(), []string{"C1", "C2"})
	want := "key " + prefix + "C2: NOPERM"
	if err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Errorf("Fetch of a missing key, then one the user may not read: %v, want an error starting %q", err, want)
	}
}

// TestRedisAuthLost: a connection dialed after the source's password
// stopped working (rotated on the server) fails the request with the
// server's WRONGPASS, in both formats. With ?format=json the pipeline's
// error was dropped: go-redis leaves the commands of a pipeline whose
// connection setup the server refused without an error, so every key
// read as an empty JSON string, a bad record of its own ("not a JSON
// object"), not retried and not a failure of the source.
func TestRedisAuthLost(t *testing.T) {
	addr := redisAddr(t)
	c := rawClient(t, addr)
	for _, format := range []string{FormatHash, FormatJSON} {
		t.Run(format, func(t *testing.T) {
			prefix := testPrefix(t, addr)
			user := strings.TrimSuffix(strings.ReplaceAll(prefix, ":", "-"), "-")
			if err := c.Do(t.Context(), "ACL", "SETUSER", user, "on", ">before", "~*", "+@all").Err(); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { c.Do(context.Background(), "ACL", "DELUSER", user) })
			rs, err := OpenRedis(customerSpec(), RedisConfig{Addr: addr, Username: user, Password: "before", Format: format, Prefix: prefix})
			if err != nil {
				t.Fatal(err)
			}
			defer rs.Close()
			if _, err := rs.Fetch(t.Context(), []string{"C1", "C2"}); err != nil {
				t.Fatalf("Fetch with the right password: %v", err)
			}
			if err := c.Do(t.Context(), "ACL", "SETUSER", user, "resetpass", ">after").Err(); err != nil {
				t.Fatal(err)
			}
			if err := c.Do(t.Context(), "CLIENT", "KILL", "USER", user).Err(); err != nil {
				t.Fatal(err)
			}
			// The first Fetch may find the killed connection; the next
			// dials one.
			for i := range 2 {
				recs, err := rs.Fetch(t.Context(), []string{"C1", "C2"})
				var bad BadRecords
				if err == nil || errors.As(err, &bad) {
					t.Fatalf("Fetch %d once the password changed: %v, %v; want the request failed", i+1, recs, err)
				}
				if i == 1 && !strings.Contains(err.Error(), "WRONGPASS") {
					t.Errorf("Fetch %d once the password changed: %v, want the server's WRONGPASS", i+1, err)
				}
			}
		})
	}
}

// noAuthServer listens on a loopback port and answers every command of
// every connection with NOAUTH (a server whose password was set, by
// CONFIG SET requirepass, after the source was configured without one),
// and returns its address.
func noAuthServer(t testing.TB) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				r := bufio.NewReader(c)
				for {
					// A command is an array of bulk strings: *N, then
					// $len and the bytes, N times.
					var n int
					if _, err := fmt.Fscanf(r, "*%d\r\n", &n); err != nil {
						return
					}
					for range n {
						var size int
						if _, err := fmt.Fscanf(r, "$%d\r\n", &size); err != nil {
							return
						}
						if _, err := r.Discard(size + 2); err != nil {
							return
						}
					}
					if _, err := io.WriteString(c, "-NOAUTH Authentication required.\r\n"); err != nil {
						return
					}
				}
			}()
		}
	}()
	return ln.Addr().String()
}

// TestRedisLoginRefused: a server that refuses the login answers Ping with
// an error that is ErrLoginRefused, and fails a request as a whole with
// the server's answer, naming no key, in both formats: the hash format
// named the request's first key (key ...C1: NOAUTH ...), as if that key
// were at fault.
func TestRedisLoginRefused(t *testing.T) {
	addr := noAuthServer(t)
	for _, format := range []string{FormatHash, FormatJSON} {
		t.Run(format, func(t *testing.T) {
			rs, err := OpenRedis(customerSpec(), RedisConfig{Addr: addr, Format: format, Prefix: "p:"})
			if err != nil {
				t.Fatal(err)
			}
			defer rs.Close()
			if err := rs.Ping(t.Context()); !errors.Is(err, ErrLoginRefused) || !strings.Contains(err.Error(), "the server refused the login: NOAUTH") {
				t.Errorf("Ping: %v, want ErrLoginRefused and the server's NOAUTH", err)
			}
			_, err = rs.Fetch(t.Context(), []string{"C1", "C2"})
			var bad BadRecords
			if err == nil || errors.As(err, &bad) || !errors.Is(err, ErrLoginRefused) || strings.Contains(err.Error(), "key ") {
				t.Errorf("Fetch: %v, want the request failed, the login refused, no key named", err)
			}
		})
	}
}

// TestRedisSilentServer: a server that accepts the connection and never
// answers fails Ping with an error that says which end waited, not a bare
// "i/o timeout"; a connection never accepted says so otherwise. It needs
// no server.
func TestRedisSilentServer(t *testing.T) {
	rs, err := OpenRedis(customerSpec(), RedisConfig{Addr: silentServer(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer rs.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	const hint = "(the server accepted the connection but did not answer in time: is it a Redis server, and neither frozen nor overloaded?)"
	if err := rs.Ping(ctx); err == nil || !strings.Contains(err.Error(), hint) {
		t.Errorf("Ping: %v; want the hint %q", err, hint)
	}
	dial := rs.explain(&net.OpError{Op: "dial", Net: "tcp", Err: os.ErrDeadlineExceeded})
	if want := "i/o timeout (the connection was not accepted in time: is the address right and the host reachable?)"; !strings.HasSuffix(dial.Error(), want) {
		t.Errorf("a dial's timeout: %v; want it to end %q", dial, want)
	}
}
