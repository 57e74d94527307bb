package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/cepheus-cep/cepheus/cep"
	"github.com/cepheus-cep/cepheus/rules"
)

var enrichCommand = &command{
	name:  "enrich",
	short: "load a lookup's records into Redis",
	subs:  []string{"load"},
	usage: "cepheus enrich load -redis HOST:PORT -rules FILE -lookup NAME -file PATH",
	help: `Enrich fills the sources of a ruleset's lookups (docs/rules.md, "Lookups").

  load   writes the records of a JSON-lines lookup file (one object a
         line: the lookup's key fields under their event names, and its
         fields; cepheus gen -profiles writes such files) into Redis,
         the way -lookup NAME=redis://HOST:PORT reads them: one hash a
         record (a field per lookup field), or with ?format=json one
         string holding a JSON object, under the key
         cepheus:lookup:NAME:KEY (KEY: a key of one field is its value
         as it is; the values of several fields are joined by "|", a
         "|" or backslash inside a value escaped with a backslash;
         ?prefix=P puts P before KEY instead). A record already
         there is replaced, also by a later line of the file with the
         same key: Redis holds the last record of each key. Prints how
         many records it wrote, and how many distinct keys they have
         when lines repeat a key (the first such line named); with
         -q, only the latter, as "enrich: warning: ...".

-redis is HOST:PORT or a URL, redis://[USER@]HOST:PORT[/DB][?format=json&prefix=P]
(rediss:// for TLS). The password comes from -redis-password-file or
$` + redisPasswordEnv + `, the user from -redis-user or $` + redisUserEnv + `; neither is
ever printed. A password in the URL (USER:PASSWORD@) is warned of: every
user of the machine can read a command line.

Examples:

  cepheus gen -o events.jsonl.gz -profiles profiles
  cepheus enrich load -redis localhost:6379 -rules rulesets/cards.cep -lookup customer -file profiles/customer.jsonl
  cepheus backtest -rules rulesets/cards.cep -events events.jsonl.gz -lookup customer=redis://localhost:6379
`,
}

func init() { enrichCommand.run = runEnrich }

func runEnrich(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet(enrichCommand, stdout)
	var lf lookupFlags
	target := fs.String("redis", "", "the Redis server: HOST:PORT or a redis:// URL (required)")
	rulesPath := fs.String("rules", "", "the ruleset file that declares the lookup, or a directory holding one *.cep file (required)")
	name := fs.String("lookup", "", "the lookup to fill (required)")
	file := fs.String("file", "", "the JSON-lines lookup file (.jsonl or .jsonl.gz) (required)")
	fs.StringVar(&lf.redisUser, "redis-user", "", "the Redis ACL user (default $"+redisUserEnv+")")
	fs.StringVar(&lf.passwordFile, "redis-password-file", "", "a file holding the Redis password (default $"+redisPasswordEnv+"; never printed)")
	fs.BoolVar(&lf.redisTLS, "redis-tls", false, "connect over TLS (rediss:// says so too)")
	fs.StringVar(&lf.redisCA, "redis-ca", "", "a PEM file of the CA the server's certificate is checked against (implies -redis-tls)")
	quiet := fs.Bool("q", false, "no summary line, unless lines of the file repeat a key (then it is written, as a warning)")
	sub := ""
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		sub, args = args[0], args[1:]
	}
	if err := fs.parse(args); err != nil {
		return err
	}
	warnCommandLinePasswords(stderr, "enrich", "-redis", "="+*target)
	if sub == "" && fs.NArg() > 0 {
		// The flags came first: cepheus enrich -redis ADDR ... load.
		sub, fs.args = fs.args[0], fs.args[1:]
	}
	switch sub {
	case "load":
	case "":
		return fs.usagef("want a subcommand: load")
	default:
		return fs.usagef("unknown subcommand %q: want load", sub)
	}
	if fs.NArg() > 0 {
		return fs.usagef("unexpected arguments %q", fs.Args())
	}
	var missing []string
	for _, f := range []struct{ flag, v string }{{"-redis", *target}, {"-rules", *rulesPath}, {"-lookup", *name}, {"-file", *file}} {
		if f.v == "" {
			missing = append(missing, f.flag)
		}
	}
	if len(missing) > 0 {
		return fs.usagef("-redis, -rules, -lookup and -file are required; missing: %s", strings.Join(missing, ", "))
	}
	url := *target
	if !strings.Contains(url, "://") {
		url = "redis://" + url // as cep.LoadLookup reads it
	}
	if err := cep.CheckLookupTarget(url); err != nil {
		return fs.usagef("-redis: %v", err)
	}
	rs, err := loadOneRuleset(fs, *rulesPath, rules.Load, stderr)
	if err != nil {
		return err
	}
	if !declares(rs, *name) {
		known := " (it declares no lookup)"
		if len(rs.Lookups) > 0 {
			var names []string
			for _, l := range rs.Lookups {
				names = append(names, l.Name)
			}
			known = " (the lookups declared: " + strings.Join(names, ", ") + ")"
			if s := rules.Suggest(*name, names); s != "" {
				known = s
			}
		}
		return fs.usagef("-lookup %s: ruleset %s has no such lookup%s", *name, rs.Name, known)
	}
	auth, err := lf.auth(func(format string, args ...any) { fmt.Fprintf(stderr, "enrich: warning: "+format+"\n", args...) })
	if err != nil {
		return err
	}
	began := time.Now()
	done, err := cep.LoadLookup(ctx, rs, *name, *file, *target, auth)
	if err != nil {
		if ctx.Err() != nil {
			return interrupted(ctx, "enrich interrupted: lookup %s may be partly written (load it again)", *name)
		}
		return userErr(err)
	}
	keys, lead := "", "enrich: "
	if d := done.Duplicates; d.Count > 0 {
		keys = fmt.Sprintf(", of %s: %s repeating the key of an earlier line (the first: %s:%d, key %q) replaced its record, so Redis holds the last record of each key",
			plural(int64(done.Keys), "distinct key", "distinct keys"), plural(int64(d.Count), "line", "lines"), d.Path, d.Line, d.Key)
	}
	if *quiet {
		if keys == "" {
			return nil
		}
		lead = "enrich: warning: "
	}
	_, err = fmt.Fprintf(stderr, "%slookup %s: %s from %s written in %s%s\n", lead, *name, plural(int64(done.Records), "record", "records"), *file,
		time.Since(began).Round(time.Millisecond), keys)
	return err
}
