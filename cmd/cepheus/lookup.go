package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/cepheus-cep/cepheus/cep"
	"github.com/cepheus-cep/cepheus/internal/humanize"
	"github.com/cepheus-cep/cepheus/rules"
)

// The environment variables of the Redis credentials (flags win).
const (
	redisUserEnv     = "CEPHEUS_REDIS_USERNAME"
	redisPasswordEnv = "CEPHEUS_REDIS_PASSWORD"
)

// lookupFlags are the flags that bind a ruleset's lookups to sources
// (backtest, run, serve): -lookup NAME=file:PATH or NAME=redis://HOST:PORT,
// the Redis credentials and TLS, and the stage's tuning.
type lookupFlags struct {
	binds        bindList
	redisUser    string
	passwordFile string
	redisTLS     bool
	redisCA      string
	opts         cep.LookupOptions
	// warned holds the warnings given so far (duplicate keys, a password
	// file others may read), so that a lookup file opened for several
	// rulesets, or jobs, is warned of once.
	warned map[string]bool
}

// bindList is the repeatable -lookup flag (a value may also list several,
// comma-separated). Its values are checked by [lookupFlags.check], not by
// Set: the flag package would print a bad value, password included.
type bindList []string

// String returns the bindings comma-separated, the password of a Redis URL
// replaced by *** (serve -print-config prints it).
func (b *bindList) String() string {
	out := make([]string, len(*b))
	for i, v := range *b {
		out[i] = hideRedisPassword(v)
	}
	return strings.Join(out, ",")
}

// warnCommandLinePasswords writes a warning to stderr for each of binds,
// values of flag given on the command line (NAME=SOURCE; =SOURCE for a
// flag that takes a source alone), whose Redis URL holds a password: every
// user of the machine can read a process's command line (ps,
// /proc/PID/cmdline).
func warnCommandLinePasswords(stderr io.Writer, cmd, flag string, binds ...string) {
	for _, bind := range binds {
		if hidden := hideRedisPassword(bind); hidden != bind {
			fmt.Fprintf(stderr, "%s: warning: %s %s: a password on the command line is visible to every user of this machine (ps): give it with -redis-password-file or $%s\n",
				cmd, flag, strings.TrimPrefix(hidden, "="), redisPasswordEnv)
		}
	}
}

// hideRedisPassword returns the binding NAME=SOURCE with the password of a
// redis:// or rediss:// source's user information, if any, replaced by ***.
func hideRedisPassword(bind string) string {
	name, src, _ := strings.Cut(bind, "=")
	rest, ok := strings.CutPrefix(src, "redis://")
	if !ok {
		rest, ok = strings.CutPrefix(src, "rediss://")
	}
	at := strings.LastIndex(rest, "@")
	if !ok || at < 0 {
		return bind
	}
	user, _, hasPassword := strings.Cut(rest[:at], ":")
	if !hasPassword {
		return bind
	}
	return name + "=" + src[:len(src)-len(rest)] + user + ":***" + rest[at:]
}

func (b *bindList) Set(s string) error {
	for _, v := range strings.Split(s, ",") {
		if v = strings.TrimSpace(v); v != "" {
			*b = append(*b, v)
		}
	}
	return nil
}

func (lf *lookupFlags) register(fs *flagSet) {
	fs.Var(&lf.binds, "lookup", "bind a lookup of the ruleset to its data, NAME=file:PATH (a JSON-lines file, as cepheus gen -profiles writes) or NAME=redis://HOST:PORT (rediss:// for TLS; ?format=json for JSON strings instead of hashes; filled by cepheus enrich load); repeat it, or list several comma-separated; a lookup left unbound gives every event its declared defaults (with a warning)")
	fs.StringVar(&lf.redisUser, "redis-user", "", "the Redis ACL user of redis:// lookups (default $"+redisUserEnv+")")
	fs.StringVar(&lf.passwordFile, "redis-password-file", "", "a file holding the Redis password of redis:// lookups (default $"+redisPasswordEnv+"; never printed)")
	fs.BoolVar(&lf.redisTLS, "redis-tls", false, "connect to redis:// lookups over TLS (rediss:// says so too)")
	fs.StringVar(&lf.redisCA, "redis-ca", "", "a PEM file of the CA the Redis server's certificate is checked against (implies -redis-tls)")
	fs.IntVar(&lf.opts.Batch, "lookup-batch", 0, "events enriched together; their keys missing from the cache go out in requests of at most this many (0: the default, 256)")
	fs.IntVar(&lf.opts.InFlight, "lookup-in-flight", 0, "requests in flight at once, per lookup (0: the default, 4)")
	fs.DurationVar(&lf.opts.Timeout, "lookup-timeout", 0, "timeout of each request, for lookups whose declaration gives none (0: the default, 250ms; there is no unbounded wait); a request that fails follows the lookup's 'on failure' policy")
	fs.IntVar(&lf.opts.CacheSize, "lookup-cache", 0, "records cached per lookup (0: the default, 100000; -1: no cache)")
	fs.DurationVar(&lf.opts.CacheTTL, "lookup-cache-ttl", 0, "how long a cached record is used before it is read again (0: the default, 5m)")
}

// outOfRange describes the lookup settings whose values are out of range,
// one message per flag, for the command's usage error (the engine would
// refuse them too, later and in its own terms).
func (lf *lookupFlags) outOfRange() []string {
	var msgs []string
	negative := func(flag string, bad bool, v any) {
		if bad {
			msgs = append(msgs, fmt.Sprintf("%s %v is negative", flag, v))
		}
	}
	o := &lf.opts
	negative("-lookup-batch", o.Batch < 0, o.Batch)
	negative("-lookup-in-flight", o.InFlight < 0, o.InFlight)
	negative("-lookup-timeout", o.Timeout < 0, formatDuration(o.Timeout))
	negative("-lookup-cache-ttl", o.CacheTTL < 0, formatDuration(o.CacheTTL))
	if o.CacheSize < -1 {
		msgs = append(msgs, fmt.Sprintf("-lookup-cache %d: -1 (no cache), 0 (the default) or a number of records", o.CacheSize))
	}
	return msgs
}

// auth returns the Redis credentials of the flags and the environment. A
// -redis-password-file that others may read is warned of (warnf), once.
func (lf *lookupFlags) auth(warnf func(format string, args ...any)) (cep.RedisAuth, error) {
	a := cep.RedisAuth{Username: lf.redisUser, TLS: lf.redisTLS, CAFile: lf.redisCA}
	if a.Username == "" {
		a.Username = os.Getenv(redisUserEnv)
	}
	a.Password = os.Getenv(redisPasswordEnv)
	if lf.passwordFile != "" {
		b, err := os.ReadFile(lf.passwordFile)
		if err != nil {
			return a, fmt.Errorf("-redis-password-file: %w", err)
		}
		a.Password = strings.TrimRight(string(b), "\r\n")
		if st, err := os.Stat(lf.passwordFile); err == nil && st.Mode().Perm()&0o077 != 0 {
			msg := fmt.Sprintf("-redis-password-file %s: others may read it (mode %04o): chmod 600 %s", lf.passwordFile, st.Mode().Perm(), lf.passwordFile)
			if !lf.warned[msg] {
				if lf.warned == nil {
					lf.warned = map[string]bool{}
				}
				lf.warned[msg] = true
				warnf("%s", msg)
			}
		}
	}
	return a, nil
}

// pingTimeout is how long a lookup's source is given to answer at the start
// before the command warns that it does not.
const pingTimeout = 2 * time.Second

// open opens the sources of the -lookup flags for rs and returns the
// engine option binding them, and the function that closes them. It warns
// (warnf), once per lookup, of the lookups left unbound, of Redis servers
// that do not answer yet (their lookups' failure policy applies until they
// do), and of lookup files with lines that repeat a key (once per file
// over the calls: the last record of each key is used). A Redis server
// that refuses the login (a wrong user or password) is an error.
func (lf *lookupFlags) open(ctx context.Context, rs *rules.Ruleset, warnf func(format string, args ...any)) (cep.Option, func(), error) {
	auth, err := lf.auth(warnf)
	if err != nil {
		return nil, nil, err
	}
	sources := map[string]cep.LookupSource{}
	closeAll := func() {
		for _, s := range sources {
			_ = s.Close()
		}
	}
	for _, b := range lf.binds {
		name, target, _ := cep.ParseLookupBinding(b)
		if !declares(rs, name) {
			continue // another ruleset's (check)
		}
		if _, dup := sources[name]; dup {
			closeAll()
			return nil, nil, fmt.Errorf("-lookup %s is given twice", name)
		}
		src, err := cep.OpenLookupSource(rs, name, target, auth)
		if err != nil {
			closeAll()
			return nil, nil, userErr(err)
		}
		sources[name] = src
		var msgs []string
		if d := cep.LookupFileDuplicates(src); d.Count > 0 {
			msgs = append(msgs, fmt.Sprintf("lookup %s: %s: %s repeating the key of an earlier line (the first: %s:%d, key %q); the last record of each key is used",
				name, d.Path, plural(int64(d.Count), "line", "lines"), d.Path, d.Line, d.Key))
		}
		if missing, members := cep.LookupFileMissing(src); len(missing) > 0 {
			// A member named otherwise in the file gave every event the
			// default, and the rules reading it went quiet, silently.
			msgs = append(msgs, fmt.Sprintf("lookup %s: no record of %s gives %s: every event gets the default%s", name, strings.TrimPrefix(target, "file:"),
				strings.Join(missing, ", "), memberHint(missing, members)))
		}
		for _, msg := range msgs {
			if !lf.warned[msg] {
				if lf.warned == nil {
					lf.warned = map[string]bool{}
				}
				lf.warned[msg] = true
				warnf("%s", msg)
			}
		}
		pctx, cancel := context.WithTimeout(ctx, pingTimeout)
		if err := cep.PingLookupSource(pctx, src); err != nil {
			if why := errors.Unwrap(err); why != nil {
				err = why // the error of the ping, without the source named again
			}
			if dl, _ := pctx.Deadline(); ctx.Err() == nil && !time.Now().Before(dl) {
				// The connection's "i/o timeout" (its deadline is the
				// ping's) says less than how long it was given.
				err = fmt.Errorf("no answer within %v", pingTimeout)
			}
			// A refused login or database is an answer, not a server
			// down: every event would get the defaults (or be a dead
			// letter) until someone read the warning.
			var fix string
			switch {
			case errors.Is(err, cep.ErrLookupLogin):
				fix = fmt.Sprintf("check the user and the password of its URL, or -redis-user ($%s) and -redis-password-file ($%s)", redisUserEnv, redisPasswordEnv)
			case errors.Is(err, cep.ErrLookupDatabase):
				fix = "the number after the address in its URL picks one of the server's databases (16 by default: 0 to 15; its setting 'databases')"
			}
			if fix != "" {
				cancel()
				closeAll()
				return nil, nil, fmt.Errorf("lookup %s: %s: %w\n  %s", name, src, err, fix)
			}
			warnf("lookup %s: %s does not answer (%v): its 'on failure' policy applies until it does", name, src, err)
		}
		cancel()
	}
	for _, l := range rs.Lookups {
		if sources[l.Name] != nil {
			continue
		}
		// Of the rules run (-rule may leave out those that read it),
		// those that read the lookup: they are what the defaults quiet.
		var readers []string
		for _, r := range rs.Rules {
			if slices.ContainsFunc(r.Reads, func(n string) bool { return strings.HasPrefix(n, l.Name+".") }) {
				readers = append(readers, r.Name)
			}
		}
		if len(readers) > 0 {
			warnf("lookup %s is not bound (-lookup %s=file:PATH or redis://HOST:PORT): every event gets its defaults (read by %s)", l.Name, l.Name, strings.Join(readers, ", "))
		}
	}
	return cep.WithLookups(sources, lf.opts), closeAll, nil
}

// check reports a -lookup name given twice, a source that cannot be
// (a malformed Redis URL), and the -lookup names that none of sets
// declares.
func (lf *lookupFlags) check(sets []*rules.Ruleset) error {
	var bad []string
	seen := map[string]bool{}
	for _, b := range lf.binds {
		name, target, err := cep.ParseLookupBinding(b)
		if err != nil {
			return err
		}
		if seen[name] {
			return fmt.Errorf("-lookup %s is given twice", name)
		}
		seen[name] = true
		if err := cep.CheckLookupTarget(target); err != nil {
			return fmt.Errorf("-lookup %s: %v", name, err)
		}
		found := false
		for _, rs := range sets {
			found = found || declares(rs, name)
		}
		if !found {
			bad = append(bad, name)
		}
	}
	if len(bad) == 0 {
		return nil
	}
	var have []string
	for _, rs := range sets {
		for _, l := range rs.Lookups {
			have = append(have, l.Name)
		}
	}
	e := &unknownLookupError{names: bad, known: " (the rulesets declare no lookup)"}
	if len(have) > 0 {
		e.known = " (the lookups declared: " + strings.Join(have, ", ") + ")"
		if len(bad) == 1 {
			if s := rules.Suggest(bad[0], have); s != "" {
				e.known, e.slip = s, true
			}
		}
	}
	return e
}

// unknownLookupError is a -lookup naming lookups the rulesets do not
// declare.
type unknownLookupError struct {
	names []string
	known string // what the rulesets declare, or the name meant
	slip  bool   // a name close to a declared one: known says which
}

func (e *unknownLookupError) Error() string {
	return fmt.Sprintf("-lookup %s: no such lookup%s", strings.Join(e.names, ", "), e.known)
}

func declares(rs *rules.Ruleset, name string) bool {
	for _, l := range rs.Lookups {
		if l.Name == name {
			return true
		}
	}
	return false
}

// userErr makes err a user error (its message printed as it is).
func userErr(err error) error { return &userError{msg: stripPrefixes(err.Error()), err: err} }

// printLookupSummary prints each lookup's counters. They count from the
// process's start (a lookup's cache and its figures are not in the
// checkpoints): a resumed run's (resumed) says so, since the records and
// alerts above them count from the run's start.
func printLookupSummary(w io.Writer, cmd string, ls []cep.LookupStats, resumed bool) {
	for _, l := range ls {
		text := lookupText(l)
		if resumed && l.Bound {
			name := "lookup " + l.Name + ":"
			text = name + " since this process started," + strings.TrimPrefix(text, name)
		}
		fmt.Fprintf(w, "%s: %s\n", cmd, text)
	}
}

// lookupText is a lookup's figures, as a summary and status give them.
// The events of keys without a record get the defaults as those of a
// failed request do under "on failure open": the figure after a failure
// counts the latter alone, and the line says which it counts.
func lookupText(l cep.LookupStats) string {
	if !l.Bound {
		return fmt.Sprintf("lookup %s: unbound, every event got its defaults", l.Name)
	}
	unreadable := ""
	if l.Unreadable > 0 {
		unreadable = ", " + humanize.Int(int64(l.Unreadable)) + " that did not read"
	}
	noRecord := ""
	if l.NotFound > 0 {
		noRecord = ", whose events got the defaults"
	}
	failed := "none failed"
	if l.Failures > 0 || l.Unreadable > 0 {
		failed = fmt.Sprintf("%s failed (%s): their events: %s got the defaults, %s went to the dead letters",
			humanize.Int(int64(l.Failures)), plural(int64(l.Timeouts), "timeout", "timeouts"),
			humanize.Int(int64(l.Defaulted)), humanize.Int(int64(l.Rejected)))
	}
	return fmt.Sprintf("lookup %s: %s from the cache (%.1f%%), %s looked up at the source (%s without a record%s%s) in %s; %s%s%s",
		l.Name, plural(int64(l.Hits), "key", "keys"), 100*l.HitRate(), humanize.Int(int64(l.Misses)), humanize.Int(int64(l.NotFound)), noRecord, unreadable,
		plural(int64(l.Requests), "request", "requests"), failed, lastError(l), noRecordHint(l))
}

// noRecordHint is what a lookup's summary line ends with when every key
// looked up at its source came back without a record (an empty file,
// another Redis database, JSON strings read as hashes), else "".
func noRecordHint(l cep.LookupStats) string {
	if l.Misses == 0 || l.NotFound < l.Misses || l.Failures > 0 {
		return ""
	}
	return "; no key had a record: does the source hold this lookup's records (the file, the Redis database, ?format=json)?"
}

// lastError is what a summary's lookup line ends with when requests of
// the lookup failed, or records did not read: "; last error: " and why
// the latest failed (a source's errors never show a password); "" when
// none failed.
func lastError(l cep.LookupStats) string {
	if l.Failures == 0 && l.Unreadable == 0 || l.LastError == "" {
		return ""
	}
	return "; last error: " + l.LastError
}

// memberHint is " (its lines have X: is that Y?)" for the first field of
// missing whose name is close to one of members (the lookup file's first
// line's), or "".
func memberHint(missing, members []string) string {
	for _, m := range missing {
		if c := rules.Closest(m, members); c != "" {
			return fmt.Sprintf(" (its lines have %s: is that %s?)", c, m)
		}
	}
	return ""
}
