package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"time"

	"github.com/cepheus-cep/cepheus/cep"
)

var consumeCommand = &command{
	name:  "consume",
	short: "print the records of a Kafka topic (alerts, dead letters) as JSON lines",
	usage: "cepheus consume -brokers B -topic T [-idle 5s] [-isolation read_committed|read_uncommitted]",
	help: `Consume prints the records of a Kafka topic to stdout, each record's
value on a line of its own, as it is: a topic of JSON lines (the alerts of
cepheus run, or what cepheus produce wrote) comes out as JSON lines. It
reads every partition from the beginning, without a consumer group (it
commits no offsets), and exits 0 once it has read every partition to its
end and no record has come for -idle. Records of one partition keep their
order; partitions interleave.

By default it reads committed records only (-isolation read_committed): a
record written in a transaction is shown once the transaction commits, and
never when it aborts; an open transaction holds back what comes after it
in its partition. This is how alerts must be read. -isolation
read_uncommitted shows every record as soon as it is written.

-brokers is a comma-separated list of host:port, by default the value of
$CEPHEUS_KAFKA_BROKERS. A topic that does not exist is an error, and a
broker that does not answer fails the command after 45 s. A summary
goes to stderr.
`,
}

func init() { consumeCommand.run = runConsume }

func runConsume(ctx context.Context, args []string, stdout, stderr io.Writer) (err error) {
	fs := newFlagSet(consumeCommand, stdout)
	brokers := fs.String("brokers", "", "Kafka brokers, host:port[,host:port...] (default: $"+brokersEnv+")")
	topic := fs.String("topic", "", "topic to read (required)")
	idle := fs.Duration("idle", 5*time.Second, "exit once everything is read and no record has come for this long")
	isolation := fs.String("isolation", "read_committed", "read_committed (records of committed transactions only) or read_uncommitted (every record)")
	quiet := fs.Bool("q", false, "no summary")
	secFlags := addKafkaSecurityFlags(fs)
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
	if *topic == "" {
		return fs.usagef("-topic is required")
	}
	if *idle <= 0 {
		return fs.usagef("-idle %v: want a positive duration", *idle)
	}
	var uncommitted bool
	switch *isolation {
	case "read_committed":
	case "read_uncommitted":
		uncommitted = true
	default:
		return fs.usagef("-isolation %q: want read_committed or read_uncommitted", *isolation)
	}
	if err := brokersRefuse(ctx, seeds, sec); err != nil {
		return err
	}
	began := time.Now()
	bw := bufio.NewWriterSize(stdout, 1<<16)
	res, err := cep.KafkaConsume(ctx, cep.KafkaConsumeConfig{
		Brokers:         seeds,
		Security:        sec,
		Topic:           *topic,
		Idle:            *idle,
		ReadUncommitted: uncommitted,
	}, bw)
	if ferr := bw.Flush(); err == nil {
		err = ferr
	}
	if err != nil {
		if ctx.Err() != nil {
			return interrupted(ctx, "consume interrupted: %s read from %s", plural(res.Records, "record", "records"), *topic)
		}
		return err
	}
	if !*quiet {
		fmt.Fprintf(stderr, "consume: %s (%s) from %s (%s) in %.1fs\n", plural(res.Records, "record", "records"),
			humanBytes(res.Bytes), *topic, plural(int64(res.Partitions), "partition", "partitions"), time.Since(began).Seconds())
	}
	return nil
}
