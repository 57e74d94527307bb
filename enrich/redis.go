package enrich

import (
	"cmp"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"

	"github.com/cepheus-cep/cepheus/event"
)

// The formats of lookup records in Redis ([RedisConfig.Format]).
const (
	FormatHash = "hash"
	FormatJSON = "json"
)

// RedisConfig says where and how a lookup's records live in Redis.
type RedisConfig struct {
	// Addr is the server's host:port.
	Addr string
	// Username is the ACL user; "" is the default user.
	Username string
	// Password authenticates Username; "" sends none. It never appears in
	// String or in errors.
	Password string
	// TLS connects with TLS, trusting the system roots, the server name
	// being Addr's host.
	TLS bool
	// CAFile is a PEM file of CA certificates to trust instead of the
	// system roots. It implies TLS.
	CAFile string
	// DB is the database number.
	DB int
	// Format is how a record is stored under its key. FormatHash ("hash",
	// the default, also for ""): a hash, one hash field per lookup field
	// (fetched with pipelined HMGET and EXISTS). FormatJSON ("json"): a
	// string holding a JSON object, whose members convert as [OpenFile]
	// converts a line's (fetched with pipelined GETs).
	Format string
	// Prefix goes before each key ([KeyOf]) to make the Redis key; ""
	// means "cepheus:lookup:" + the lookup's name + ":".
	Prefix string
	// PoolSize is the most connections to the server; 0 is go-redis's
	// default (10 per CPU).
	PoolSize int
}

// ParseRedisURL parses a Redis URL into a RedisConfig:
//
//	redis://[user[:password]@]host[:port][/db][?format=hash|json&prefix=P&ca=FILE]
//
// rediss:// sets TLS; ca names a PEM CA file and implies TLS. The port
// defaults to 6379, the database to 0. An error never shows the password.
func ParseRedisURL(s string) (RedisConfig, error) {
	var c RedisConfig
	u, err := url.Parse(s)
	if err != nil {
		// url.Error quotes the whole URL, password included.
		var uerr *url.Error
		if errors.As(err, &uerr) {
			err = uerr.Err
		}
		return c, fmt.Errorf("enrich: redis URL: %w", err)
	}
	switch u.Scheme {
	case "redis":
	case "rediss":
		c.TLS = true
	default:
		return c, fmt.Errorf("enrich: redis URL: scheme %q, want redis or rediss", u.Scheme)
	}
	if u.Opaque != "" || u.Hostname() == "" {
		return c, fmt.Errorf("enrich: redis URL %s: no host", redactURL(u))
	}
	port := u.Port()
	if port == "" {
		port = "6379"
	}
	c.Addr = net.JoinHostPort(u.Hostname(), port)
	if u.User != nil {
		c.Username = u.User.Username()
		c.Password, _ = u.User.Password()
	}
	if db := strings.TrimPrefix(u.Path, "/"); db != "" {
		n, err := strconv.Atoi(db)
		if err != nil || n < 0 {
			return c, fmt.Errorf("enrich: redis URL %s: database %q is not a number >= 0", redactURL(u), db)
		}
		c.DB = n
	}
	q, err := url.ParseQuery(u.RawQuery)
	if err != nil {
		return c, fmt.Errorf("enrich: redis URL %s: %w", redactURL(u), err)
	}
	for name, vs := range q {
		if len(vs) > 1 {
			return c, fmt.Errorf("enrich: redis URL %s: parameter %s given %d times", redactURL(u), name, len(vs))
		}
		switch v := vs[0]; name {
		case "format":
			if v != FormatHash && v != FormatJSON {
				return c, fmt.Errorf("enrich: redis URL %s: format %q, want hash or json", redactURL(u), v)
			}
			c.Format = v
		case "prefix":
			c.Prefix = v
		case "ca":
			c.CAFile = v
		default:
			return c, fmt.Errorf("enrich: redis URL %s: unknown parameter %q (want format, prefix or ca)", redactURL(u), name)
		}
	}
	return c, nil
}

// redactURL is u with its password, if any, replaced by ***.
func redactURL(u *url.URL) string {
	if _, has := u.User.Password(); has {
		r := *u
		r.User = url.UserPassword(u.User.Username(), "***")
		return strings.Replace(r.String(), "%2A%2A%2A@", "***@", 1)
	}
	return u.String()
}

// String returns c as a URL that [ParseRedisURL] reads back, the password
// (if any) replaced by ***: redis://user:***@host:port/0?format=hash.
func (c RedisConfig) String() string {
	var b strings.Builder
	if c.TLS || c.CAFile != "" {
		b.WriteString("rediss://")
	} else {
		b.WriteString("redis://")
	}
	if c.Username != "" || c.Password != "" {
		b.WriteString(url.User(c.Username).String())
		if c.Password != "" {
			b.WriteString(":***")
		}
		b.WriteByte('@')
	}
	b.WriteString(c.Addr)
	b.WriteByte('/')
	b.WriteString(strconv.Itoa(c.DB))
	q := url.Values{"format": {c.format()}}
	if c.Prefix != "" {
		q.Set("prefix", c.Prefix)
	}
	if c.CAFile != "" {
		q.Set("ca", c.CAFile)
	}
	b.WriteByte('?')
	b.WriteString(q.Encode())
	return b.String()
}

// format returns c.Format, "" being FormatHash.
func (c RedisConfig) format() string {
	if c.Format == "" {
		return FormatHash
	}
	return c.Format
}

// prefix returns the key prefix of spec's records.
func (c RedisConfig) prefix(spec Spec) string {
	if c.Prefix == "" {
		return "cepheus:lookup:" + spec.Name + ":"
	}
	return c.Prefix
}

// validate reports every problem of c, joined.
func (c RedisConfig) validate() error {
	var errs []error
	if _, _, err := net.SplitHostPort(c.Addr); err != nil {
		errs = append(errs, fmt.Errorf("address %q is not host:port", c.Addr))
	}
	if f := c.format(); f != FormatHash && f != FormatJSON {
		errs = append(errs, fmt.Errorf("format %q, want hash or json", c.Format))
	}
	if c.DB < 0 {
		errs = append(errs, fmt.Errorf("negative database %d", c.DB))
	}
	if c.PoolSize < 0 {
		errs = append(errs, fmt.Errorf("negative pool size %d", c.PoolSize))
	}
	return errors.Join(errs...)
}

// options returns the go-redis options of c.
func (c RedisConfig) options() (*redis.Options, error) {
	o := &redis.Options{
		Addr:     c.Addr,
		Username: c.Username,
		Password: c.Password,
		DB:       c.DB,
		PoolSize: c.PoolSize,
		// The Lookup's Policy retries; go-redis must not retry behind it,
		// nor dial several times within one attempt.
		MaxRetries:    -1,
		DialerRetries: 1,
		// Each attempt's deadline is its ctx's.
		ContextTimeoutEnabled: true,
		// Cluster maintenance notifications need RESP3 push support and
		// change nothing for a lookup.
		MaintNotificationsConfig: &maintnotifications.Config{Mode: maintnotifications.ModeDisabled},
	}
	if c.TLS || c.CAFile != "" {
		host, _, _ := net.SplitHostPort(c.Addr)
		o.TLSConfig = &tls.Config{ServerName: host, MinVersion: tls.VersionTLS12}
		if c.CAFile != "" {
			pem, err := os.ReadFile(c.CAFile)
			if err != nil {
				return nil, err
			}
			pool := x509.NewCertPool()
			if !pool.AppendCertsFromPEM(pem) {
				return nil, fmt.Errorf("%s: no PEM certificate", c.CAFile)
			}
			o.TLSConfig.RootCAs = pool
		}
	}
	return o, nil
}

// RedisSource is a [Source] over Redis (see [RedisConfig.Format] for how
// records are stored). All its methods may be called concurrently.
type RedisSource struct {
	spec   Spec
	cfg    RedisConfig
	client *redis.Client
	prefix string
	fields []string // the hash fields of spec.Fields, in order
	codec  recordCodec
}

// quietOnce silences go-redis's own log (a line on stderr for every
// failed dial: a flood while a server is down). A failed request is
// already an error of its Fetch, counted and handled by the lookup's
// policy; enrich is the one user of go-redis in the process.
var quietOnce sync.Once

type quietLogger struct{}

func (quietLogger) Printf(context.Context, string, ...any) {}

// OpenRedis returns a source of spec's records in the Redis of cfg. It does
// not connect: a server that is down fails each Fetch (which the Lookup's
// Policy handles), and [RedisSource.Ping] checks it.
func OpenRedis(spec Spec, cfg RedisConfig) (*RedisSource, error) {
	if err := spec.validate(); err != nil {
		return nil, err
	}
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("enrich: lookup %s: redis %s: %w", spec.Name, cfg, err)
	}
	opts, err := cfg.options()
	if err != nil {
		return nil, fmt.Errorf("enrich: lookup %s: redis %s: %w", spec.Name, cfg, err)
	}
	quietOnce.Do(func() { redis.SetLogger(quietLogger{}) })
	fields := make([]string, len(spec.Fields))
	for i, f := range spec.Fields {
		fields[i] = f.Name
	}
	return &RedisSource{
		spec:   spec,
		cfg:    cfg,
		client: redis.NewClient(opts),
		prefix: cfg.prefix(spec),
		fields: fields,
		codec:  recordCodec{spec: spec},
	}, nil
}

// String implements [Source]: the configuration as a URL, without the
// password ([RedisConfig.String]).
func (s *RedisSource) String() string { return s.cfg.String() }

// Close implements [Source]: it closes the connections.
func (s *RedisSource) Close() error { return s.client.Close() }

// Ping checks that the server answers, within ctx.
func (s *RedisSource) Ping(ctx context.Context) error {
	if err := s.client.Ping(ctx).Err(); err != nil {
		if redis.IsAuthError(err) {
			return fmt.Errorf("enrich: %s: ping: %w", s, loginError(s.redact(err)))
		}
		if strings.Contains(err.Error(), "DB index is out of range") {
			return fmt.Errorf("enrich: %s: ping: %w", s, noDatabase{s.redact(err)})
		}
		return fmt.Errorf("enrich: %s: ping: %w", s, s.explain(err))
	}
	return nil
}

// ErrLoginRefused is what the error of a [RedisSource.Ping] is
// (errors.Is) when the server answered and refused the source's
// credentials (NOAUTH: none given to a server that wants them; WRONGPASS:
// a wrong user or password): a setting to fix, not a server that is down.
var ErrLoginRefused = errors.New("the server refused the login")

// ErrNoDatabase is what the error of a [RedisSource.Ping] is (errors.Is)
// when the server answered that it has no database of the URL's number
// (SELECT: "ERR DB index is out of range"): a setting to fix, not a
// server that is down.
var ErrNoDatabase = errors.New("the server has no database of that number")

// noDatabase is the server's refusal of the URL's database: ErrNoDatabase
// and the server's answer.
type noDatabase struct{ err error }

func (e noDatabase) Error() string        { return ErrNoDatabase.Error() + ": " + e.err.Error() }
func (e noDatabase) Unwrap() error        { return e.err }
func (e noDatabase) Is(target error) bool { return target == ErrNoDatabase }

// loginRefused is the server's refusal of the login: ErrLoginRefused and
// the server's answer.
type loginRefused struct{ err error }

func (e loginRefused) Error() string        { return ErrLoginRefused.Error() + ": " + e.err.Error() }
func (e loginRefused) Unwrap() error        { return e.err }
func (e loginRefused) Is(target error) bool { return target == ErrLoginRefused }

// loginError returns err as a loginRefused when it is the server's refusal
// of the login (redis.IsAuthError), else err.
func loginError(err error) error {
	if redis.IsAuthError(err) {
		return loginRefused{err}
	}
	return err
}

// Fetch implements [Source]: one pipeline for all keys (HMGET and EXISTS
// per key for FormatHash, GET for FormatJSON). A value that does not
// convert to its field's kind, or a key that holds another type than the
// format's (a hash, a string), fails its key's record alone ([BadRecords]),
// naming the Redis key (and the field).
func (s *RedisSource) Fetch(ctx context.Context, keys []string) ([][]event.Value, error) {
	if len(keys) == 0 {
		return [][]event.Value{}, nil
	}
	var out [][]event.Value
	var err error
	if s.cfg.format() == FormatJSON {
		out, err = s.fetchJSON(ctx, keys)
	} else {
		out, err = s.fetchHash(ctx, keys)
	}
	return out, s.redact(err)
}

func (s *RedisSource) fetchHash(ctx context.Context, keys []string) ([][]event.Value, error) {
	pipe := s.client.Pipeline()
	hm := make([]*redis.SliceCmd, len(keys))
	// EXISTS tells a hash without any of the fields from no hash.
	ex := make([]*redis.IntCmd, len(keys))
	for i, k := range keys {
		hm[i] = pipe.HMGet(ctx, s.prefix+k, s.fields...)
		ex[i] = pipe.Exists(ctx, s.prefix+k)
	}
	// A key holding another type than a hash fails alone (WRONGTYPE); any
	// other error (the connection's, a server loading its data) fails the
	// request.
	if _, err := pipe.Exec(ctx); err != nil {
		wrong := false
		for i := range keys {
			e := hm[i].Err()
			if e != nil && !wrongType(e) || ex[i].Err() != nil {
				return nil, s.replyError(err, keys, func(i int) error { return cmp.Or(hm[i].Err(), ex[i].Err()) })
			}
			wrong = wrong || e != nil
		}
		if !wrong {
			return nil, loginError(err)
		}
	}
	out := make([][]event.Value, len(keys))
	var bad BadRecords
	for i, k := range keys {
		var err error
		switch {
		case wrongType(hm[i].Err()):
			// Most often records written as JSON strings (enrich load
			// -redis ...?format=json) read as hashes.
			err = fmt.Errorf("key %s: %w (not a hash: records written as JSON strings are read with ?format=json)", s.prefix+k, hm[i].Err())
		case ex[i].Val() == 0:
			continue
		default:
			out[i], err = s.hashRecord(k, hm[i].Val())
		}
		if err != nil {
			bad = append(bad, BadRecord{Index: i, Err: err})
		}
	}
	if bad != nil {
		return out, bad
	}
	return out, nil
}

// wrongType reports whether err is the server's WRONGTYPE reply: the key
// holds a value of another type than the command reads.
func wrongType(err error) bool {
	var rerr redis.Error
	return errors.As(err, &rerr) && strings.HasPrefix(rerr.Error(), "WRONGTYPE")
}

// hashRecord converts the values of key's hash fields into a record.
func (s *RedisSource) hashRecord(key string, vals []any) ([]event.Value, error) {
	rec := make([]event.Value, len(s.spec.Fields))
	for j, v := range vals {
		if v == nil {
			continue
		}
		str, ok := v.(string)
		if !ok {
			return nil, fmt.Errorf("key %s: hash field %s: a reply of type %T", s.prefix+key, s.fields[j], v)
		}
		var err error
		if rec[j], err = hashValue(s.spec.Fields[j], str); err != nil {
			return nil, fmt.Errorf("key %s: hash field %s: %w", s.prefix+key, s.fields[j], err)
		}
	}
	return rec, nil
}

// fetchJSON reads keys with one pipeline of GETs rather than an MGET,
// whose nil answer for a key of another type (a hash: records loaded
// without ?format=json) would read as no record, every event silently
// given the defaults; a GET answers WRONGTYPE, which fails the key alone.
func (s *RedisSource) fetchJSON(ctx context.Context, keys []string) ([][]event.Value, error) {
	pipe := s.client.Pipeline()
	gets := make([]*redis.StringCmd, len(keys))
	for i, k := range keys {
		gets[i] = pipe.Get(ctx, s.prefix+k)
	}
	// Exec's error is the first command's, often a missing key's
	// redis.Nil, which like a WRONGTYPE is an answer: each command's is
	// looked at. Any other error fails the request, a reply of the server
	// (NOPERM for a key) naming its key, the connection's as it is.
	_, xerr := pipe.Exec(ctx)
	for i, k := range keys {
		e := gets[i].Err()
		if e == nil || errors.Is(e, redis.Nil) || wrongType(e) {
			continue
		}
		var rerr redis.Error
		if errors.As(e, &rerr) && !redis.IsAuthError(e) {
			return nil, fmt.Errorf("key %s: %w", s.prefix+k, e)
		}
		return nil, loginError(e)
	}
	if xerr != nil && !errors.Is(xerr, redis.Nil) && !wrongType(xerr) {
		// No command holds it: the server refused the setup of a new
		// connection (WRONGPASS once the password changed), which
		// go-redis does not set on the commands; each would read as an
		// empty string, a bad record.
		return nil, loginError(xerr)
	}
	out := make([][]event.Value, len(keys))
	var bad BadRecords
	for i, k := range keys {
		str, err := gets[i].Result()
		switch {
		case errors.Is(err, redis.Nil):
			continue
		case wrongType(err):
			err = fmt.Errorf("key %s: %w (not a string: records written as hashes, as enrich load writes them without ?format=json, are read without it)", s.prefix+k, err)
		default:
			if _, out[i], err = s.codec.decodeObject([]byte(str), nil); err != nil {
				err = fmt.Errorf("key %s: %w", s.prefix+k, err)
			}
		}
		if err != nil {
			bad = append(bad, BadRecord{Index: i, Err: err})
		}
	}
	if bad != nil {
		return out, bad
	}
	return out, nil
}

// replyError names the key of a pipeline's error when it is the server's
// reply to one of its commands (WRONGTYPE, say); errOf returns the error of
// key i's command. Other errors (the connection's) are returned as they are.
func (s *RedisSource) replyError(err error, keys []string, errOf func(i int) error) error {
	var rerr redis.Error
	if !errors.As(err, &rerr) {
		return err
	}
	if redis.IsAuthError(err) {
		// Every command of the request met it: no key is at fault.
		return loginError(err)
	}
	for i := range keys {
		if e := errOf(i); e != nil && errors.As(e, &rerr) {
			return fmt.Errorf("key %s: %w", s.prefix+keys[i], e)
		}
	}
	return err
}

// explain returns err as [RedisSource.redact] does, a connection closed
// without a reply to a client without TLS saying what is most likely the
// cause: a server that speaks only TLS closes it at the first command,
// which go-redis reports as a bare "EOF". For the checks of a source at
// the start ([RedisSource.Ping], [Load]): a request of a running job
// meets EOF also when the server goes away.
func (s *RedisSource) explain(err error) error {
	if !s.cfg.TLS && s.cfg.CAFile == "" && (errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF)) {
		err = fmt.Errorf("%w (the server closed the connection without a reply, as one that speaks only TLS does: then use rediss:// or -redis-tls)", err)
	}
	// A bare "i/o timeout" said nothing of which end waited.
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		var op *net.OpError
		if errors.As(err, &op) && op.Op == "dial" {
			err = fmt.Errorf("%w (the connection was not accepted in time: is the address right and the host reachable?)", err)
		} else {
			err = fmt.Errorf("%w (the server accepted the connection but did not answer in time: is it a Redis server, and neither frozen nor overloaded?)", err)
		}
	}
	return s.redact(err)
}

// redact returns err with any occurrence of the password replaced by ***;
// go-redis's errors are not known to carry it, and must not pass it on.
func (s *RedisSource) redact(err error) error {
	if err == nil || s.cfg.Password == "" || !strings.Contains(err.Error(), s.cfg.Password) {
		return err
	}
	if bad, ok := err.(BadRecords); ok {
		out := make(BadRecords, len(bad))
		for i, b := range bad {
			out[i] = BadRecord{Index: b.Index, Err: s.redact(b.Err)}
		}
		return out
	}
	return errors.New(strings.ReplaceAll(err.Error(), s.cfg.Password, "***"))
}

// loadBatch is the number of records [Load] writes per pipeline.
const loadBatch = 512

// Loaded is what [Load] wrote.
type Loaded struct {
	// Records is the number of records written, one per record line of
	// the file (all of them unless Load failed while writing).
	Records int
	// Keys is the number of distinct keys of the file: fewer than its
	// records when lines repeat a key, whose later record replaced the
	// earlier one in Redis (Duplicates).
	Keys int
	// Duplicates are the lines that repeat the key of an earlier line.
	Duplicates Duplicates
}

// Load writes the records of the lookup file at path (read as [OpenFile]
// reads it) into the Redis of cfg, the way a [RedisSource] of cfg reads
// them, and returns how many it wrote and how many distinct keys they
// have: one record per record line, a key repeated in the file being
// written each time (the last line wins, as in OpenFile). A record's Redis
// key is the prefix (cfg.Prefix, or the default) followed by its key
// ([KeyOf]). FormatHash: DEL, then HSET of the key members (as key parts)
// and of the fields present and not null; FormatJSON: SET of a JSON object
// of the same members. The writes go in MULTI/EXEC pipelines of 512
// records.
//
// Load checks the whole file (and counts its keys) before it writes
// anything; an error while writing leaves the batches before it written
// (Records says how many records).
func Load(ctx context.Context, spec Spec, path string, cfg RedisConfig) (Loaded, error) {
	var done Loaded
	src, err := OpenRedis(spec, cfg)
	if err != nil {
		return done, err
	}
	defer src.Close()
	if done.Keys, done.Duplicates, err = checkFile(ctx, spec, path); err != nil {
		return Loaded{}, err
	}
	type record struct {
		key   string
		parts []string
		rec   []event.Value
	}
	batch := make([]record, 0, loadBatch)
	flush := func() error {
		_, err := src.client.TxPipelined(ctx, func(p redis.Pipeliner) error {
			for _, r := range batch {
				if err := src.write(ctx, p, r.key, r.parts, r.rec); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("enrich: lookup %s: load %s into %s: %w", spec.Name, path, src, src.explain(err))
		}
		done.Records += len(batch)
		batch = batch[:0]
		return nil
	}
	err = readFile(spec, path, nil, func(_ int, key string, parts []string, rec []event.Value) error {
		batch = append(batch, record{key: key, parts: append([]string(nil), parts...), rec: rec})
		if len(batch) < loadBatch {
			return nil
		}
		return flush()
	})
	if err == nil && len(batch) > 0 {
		err = flush()
	}
	return done, err
}

// checkFile reads the lookup file at path through, as [Load] does before
// it writes, and returns the number of distinct keys and the lines that
// repeat one.
func checkFile(ctx context.Context, spec Spec, path string) (keys int, dups Duplicates, err error) {
	seen := make(map[string]struct{})
	err = readFile(spec, path, nil, func(line int, key string, _ []string, _ []event.Value) error {
		if _, ok := seen[key]; ok {
			dups.add(path, line, key)
		}
		seen[key] = struct{}{}
		return ctx.Err()
	})
	return len(seen), dups, err
}

// write queues on p the commands that store one record.
func (s *RedisSource) write(ctx context.Context, p redis.Pipeliner, key string, parts []string, rec []event.Value) error {
	rk := s.prefix + key
	if s.cfg.format() == FormatJSON {
		obj, err := s.codec.encodeObject(parts, rec)
		if err != nil {
			return err
		}
		p.Set(ctx, rk, obj, 0)
		return nil
	}
	// The key members make the hash exist even when the record has no
	// field; a field of the same name as a key member comes after and wins.
	args := make([]any, 0, 2*(len(parts)+len(rec)))
	for i, name := range s.spec.KeyFields {
		args = append(args, name, parts[i])
	}
	for j, v := range rec {
		if !v.IsNull() {
			args = append(args, s.fields[j], hashString(v))
		}
	}
	p.Del(ctx, rk)
	p.HSet(ctx, rk, args...)
	return nil
}
