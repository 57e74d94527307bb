package main

import (
	"bufio"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"os"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/cepheus-cep/cepheus/cep"
	"github.com/cepheus-cep/cepheus/internal/humanize"
	"github.com/cepheus-cep/cepheus/rules"
)

// brokersEnv names the environment variable that -brokers defaults to.
const brokersEnv = "CEPHEUS_KAFKA_BROKERS"

var produceCommand = &command{
	name:  "produce",
	short: "write JSON-lines events into a Kafka topic",
	usage: "cepheus produce -brokers B -topic T -events file.jsonl|file.jsonl.gz|- [-partitions N] [-key FIELD] [-time-field F [-time-unit ms|s]] [-compression C]",
	help: `Produce writes a file of JSON lines (cepheus gen writes one) to a Kafka
topic, one record per line, in order, and returns once the brokers have
acknowledged every record (acks=all, idempotent). The record's value is the
line without its line end; blank lines are skipped; lines are not
checked otherwise, so a line that is not JSON is written as it is (the
engine's reader sends it to the dead letters).

The topic is created when it is missing, with -partitions partitions (the
broker's num.partitions when not given), the broker's default replication
factor and unlimited retention (retention.ms=-1: test data is dated months
before today, and time-based retention would delete it). A topic that
exists is used as it is; -partitions must then be its partition count.

Keys: -key FIELD keys each record by the value of that top-level field: a
string's characters, or the JSON text of a number, boolean, object or
array. A line without the field (or with null there, or that is no JSON
object) gets a null key, which Kafka spreads over the partitions; a
-key that the first line lacks while it has a field of a close name is
refused before anything is written (a slip). A keyed
record goes to partition murmur2(key) mod partitions, as the Java client
sends it: all events of one key land in one partition, in line order.
Without -key every record has a null key.

Timestamps: a record's timestamp is the time it is appended, unless
-time-field F names a top-level field holding an RFC 3339 time or epoch
milliseconds (-time-unit s: epoch seconds, with a fraction or not, as
run and backtest read them). A numeric time before 2000 or from 2100 on
is counted in the summary (epoch seconds read as milliseconds land in
January 1970) and written as it is, unless the broker refuses it (Kafka 4
by default refuses a timestamp more than an hour ahead of its clock:
message.timestamp.after.max.ms): the command then fails, naming the lines
refused and the time farthest from the clock among them. A time after
2262-04-11T23:47:16.854Z fails it at its line (the Kafka client writes a
timestamp through int64 nanoseconds, which cannot hold it). A line
without a usable F (a line that is not JSON) then gets the time of the
last line before it that had one (the first lines: that of the first
line with one, if it comes within 1,000 lines; else the append time), so
that it does not end a time range of backtest -topic there: such a range
ends at a partition's first record stamped at or after -to.

-brokers is a comma-separated list of host:port, by default the value of
$CEPHEUS_KAFKA_BROKERS (scripts/kafka.sh start prints the address of a
local broker). -events - reads stdin; a gzip-compressed file is detected
by its first bytes. A summary goes to stderr (-q: only its warnings, as
"produce: warning: ..." lines). Brokers that do not answer
fail the command after 45 s ("no answer from the brokers within 45s").
`,
}

func init() { produceCommand.run = runProduce }

func runProduce(ctx context.Context, args []string, stdout, stderr io.Writer) (err error) {
	fs := newFlagSet(produceCommand, stdout)
	brokers := fs.String("brokers", "", "Kafka brokers, host:port[,host:port...] (default: $"+brokersEnv+")")
	topic := fs.String("topic", "", "topic to write (required); created when missing")
	events := fs.String("events", "", "events: a JSON-lines file, .jsonl.gz, or - for stdin (required)")
	partitions := fs.Int("partitions", 0, "`count` of partitions of the topic when it is created (default: the broker's num.partitions); an existing topic must have this many")
	key := fs.String("key", "", "top-level `field` whose value keys each record (default: null keys)")
	compression := fs.String("compression", "snappy", "codec of the record batches: snappy, lz4, zstd, gzip or none (none: the least CPU for the readers, the most bytes)")
	secFlags := addKafkaSecurityFlags(fs)
	timeField := fs.String("time-field", "", "top-level `field` holding each record's timestamp, RFC 3339 or epoch milliseconds (default: the append time)")
	timeUnit := fs.String("time-unit", "ms", "unit of a -time-field written as a number: ms or s (epoch seconds, which may have a fraction)")
	quiet := fs.Bool("q", false, "no summary; its warnings (records without a key or a usable time, implausible times, lines not JSON) are still written")
	if err := fs.parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fs.usagef("unexpected arguments %q", fs.Args())
	}
	seeds, err := brokerList(fs, *brokers)
	if err != nil {
		return err
	}
	sec, err := secFlags.security(fs, stderr)
	if err != nil {
		return err
	}
	defer func() { err = loginHint(err, sec) }()
	if *topic == "" || *events == "" {
		return fs.usagef("-topic and -events are required")
	}
	if *partitions < 0 {
		return fs.usagef("-partitions %d: want a positive count", *partitions)
	}
	switch *compression {
	case "snappy", "lz4", "zstd", "gzip", "none":
	default:
		return fs.usagef("-compression %q: want snappy, lz4, zstd, gzip or none", *compression)
	}
	var unit time.Duration
	switch *timeUnit {
	case "ms":
		unit = time.Millisecond
	case "s":
		unit = time.Second
	default:
		return fs.usagef("-time-unit %q: want ms or s", *timeUnit)
	}
	if msg := keyFieldMissing(*events, *key); msg != "" {
		return fs.usagef("%s", msg)
	}
	in, closeIn, err := openLines(ctx, *events)
	if err != nil {
		return err
	}
	defer closeIn()
	if err := brokersRefuse(ctx, seeds, sec); err != nil {
		return err // after the input's check: a missing file is named first
	}
	began := time.Now()
	res, err := cep.KafkaProduce(ctx, cep.KafkaProduceConfig{
		Brokers:     seeds,
		Security:    sec,
		Topic:       *topic,
		Partitions:  *partitions,
		KeyField:    *key,
		TimeField:   *timeField,
		TimeUnit:    unit,
		Compression: *compression,
	}, in)
	if err != nil {
		if ctx.Err() != nil {
			return interrupted(ctx, "produce interrupted: %s written to %s", plural(res.Records, "record", "records"), *topic)
		}
		return err
	}
	var b strings.Builder
	warn := "produce: warning: " // with -q a line of its own, else one under the summary's
	if !*quiet {
		warn = "  "
		fmt.Fprintf(&b, "produce: %s (%s) to %s in %.1fs", plural(res.Records, "record", "records"),
			humanBytes(res.Bytes), *topic, time.Since(began).Seconds())
		created := ""
		if res.Created {
			created = ", created"
		}
		fmt.Fprintf(&b, " (%s%s)\n", plural(int64(res.Partitions), "partition", "partitions"), created)
	}
	if *key != "" && res.NullKeys > 0 {
		fmt.Fprintf(&b, warn+"%s without %s: null key\n", plural(res.NullKeys, "record", "records"), *key)
	}
	if *timeField != "" && res.Untimed > 0 {
		how := "the time of the last line before with one (the first lines: of the first line with one)"
		if res.AppendTimed > 0 {
			how += fmt.Sprintf("; %s with the append time: no line had one in the first 1,000", humanize.Int(res.AppendTimed))
		}
		fmt.Fprintf(&b, warn+"%s without a usable %s: timestamped with %s\n", plural(res.Untimed, "record", "records"), *timeField, how)
	}
	if res.Implausible > 0 {
		// Epoch seconds read as milliseconds are the usual slip; it is
		// not the one of a time in seconds.
		slip := ""
		if unit == time.Millisecond {
			slip = " (epoch seconds read as milliseconds land in January 1970)"
		}
		fmt.Fprintf(&b, warn+"%s a numeric %s before 2000 or from 2100 on, written so: is -time-unit %s right?%s\n",
			plural(res.Implausible, "record has", "records have"), *timeField, *timeUnit, slip)
	}
	if res.NotJSON > 0 {
		fmt.Fprintf(&b, warn+"%s not a JSON object, written as %s\n", plural(res.NotJSON, "line", "lines"), pick(res.NotJSON == 1, "it is", "they are"))
	}
	if res.Blank > 0 && !*quiet {
		fmt.Fprintf(&b, "  %s skipped\n", plural(res.Blank, "blank line", "blank lines"))
	}
	_, err = io.WriteString(stderr, b.String())
	return err
}

// keyFieldMissing says that -key names a field the first line of events
// (a plain file) lacks while it has one of a close name: a slip, which
// gave every record a null key (exit 0, "174,197 records without cardid").
// Any other first line passes (a field that some records lack is keyed
// where it is).
func keyFieldMissing(events, key string) string {
	if key == "" || events == "-" {
		return ""
	}
	f, err := os.Open(events)
	if err != nil {
		return ""
	}
	defer f.Close()
	if st, err := f.Stat(); err != nil || !st.Mode().IsRegular() || strings.HasSuffix(events, ".gz") {
		return ""
	}
	line, _ := bufio.NewReaderSize(f, 64<<10).ReadSlice('\n')
	var first map[string]json.RawMessage
	if json.Unmarshal(line, &first) != nil {
		return ""
	}
	if _, ok := first[key]; ok {
		return ""
	}
	names := slices.Sorted(maps.Keys(first))
	if hint := rules.Suggest(key, names); hint != "" {
		return fmt.Sprintf("-key %s: the first record of %s has no field %s%s", key, events, key, hint)
	}
	return ""
}

// brokerList returns the brokers of -brokers, else of $CEPHEUS_KAFKA_BROKERS.
func brokerList(fs *flagSet, flagValue string) ([]string, error) {
	v := flagValue
	if v == "" {
		v = os.Getenv(brokersEnv)
	}
	var out []string
	for _, b := range strings.Split(v, ",") {
		if b = strings.TrimSpace(b); b != "" {
			if msg := brokerProblem(b); msg != "" {
				return nil, fs.usagef("%s", msg)
			}
			out = append(out, b)
		}
	}
	if len(out) == 0 {
		return nil, fs.usagef("no brokers: give -brokers host:port or set $%s (scripts/kafka.sh start prints a local broker's address)", brokersEnv)
	}
	return out, nil
}

// brokersRefuse says, when every one of seeds refuses a connection or
// names no host, that nothing listens there, before a Kafka client
// retries it for 45 s (produce, consume and a topic's backtest, which a
// user runs by hand; a run or serve waits, a broker may be starting). A
// seed that does not answer within a second is left to the client.
func brokersRefuse(ctx context.Context, seeds []string, sec cep.KafkaSecurity) error {
	if err := sec.Load(); err != nil {
		return err // the settings first: a CA file missing is the cause to name
	}
	var errs []error
	for _, s := range seeds {
		if ctx.Err() != nil {
			return nil // stopped: the command says so as it ends
		}
		dctx, cancel := context.WithTimeout(ctx, time.Second)
		c, err := new(net.Dialer).DialContext(dctx, "tcp", s)
		cancel()
		if err == nil {
			c.Close()
			return nil
		}
		var dns *net.DNSError
		if !errors.Is(err, syscall.ECONNREFUSED) && !(errors.As(err, &dns) && dns.IsNotFound) {
			return nil
		}
		errs = append(errs, err)
	}
	return fmt.Errorf("no broker at %s: %w (is Kafka up, and is the address right? scripts/kafka.sh start prints a local broker's address)", strings.Join(seeds, ","), errors.Join(errs...))
}

// brokerProblem says what is wrong with broker address b, or "": a
// listener's scheme (PLAINTEXT://, Java's listener syntax) or no port
// waited for the brokers' 45 s before an error that did not say why.
func brokerProblem(b string) string {
	if scheme, rest, ok := strings.Cut(b, "://"); ok {
		return fmt.Sprintf("broker %s: give host:port, without the listener's scheme %s:// (%s; -tls and -sasl set the security)", b, scheme, rest)
	}
	if _, port, err := net.SplitHostPort(b); err != nil || port == "" {
		return fmt.Sprintf("broker %s: give host:port (Kafka listens on 9092 by default: %s:9092)", b, strings.TrimSuffix(b, ":"))
	}
	return ""
}

// openLines opens path ("-": stdin, read so that a read waiting for input
// ends when ctx is done: stdinReader) for reading, decompressing it when
// it starts with gzip's magic bytes.
func openLines(ctx context.Context, path string) (r io.Reader, close func() error, err error) {
	var in io.Reader
	closeFile := func() error { return nil } // stdin stays open
	if path == "-" {
		in = stdinReader(ctx)
	} else {
		f, err := os.Open(path)
		if err != nil {
			return nil, nil, err
		}
		in, closeFile = f, f.Close
	}
	br := bufio.NewReaderSize(in, 1<<16)
	if magic, _ := br.Peek(2); len(magic) == 2 && magic[0] == 0x1f && magic[1] == 0x8b {
		zr, err := gzip.NewReader(br)
		if err != nil {
			closeFile()
			return nil, nil, fmt.Errorf("%s: %w", path, err)
		}
		return zr, closeFile, nil
	}
	return br, closeFile, nil
}

// pick returns a when cond holds, else b.
func pick(cond bool, a, b string) string {
	if cond {
		return a
	}
	return b
}

// humanBytes formats a size in bytes for a summary: 12.3 MB.
func humanBytes(n int64) string {
	if n < 1e6 {
		return fmt.Sprintf("%.1f kB", float64(n)/1e3)
	}
	return fmt.Sprintf("%.1f MB", float64(n)/1e6)
}
