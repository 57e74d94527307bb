// Command kafkalatency measures the alert latency of Kafka mode
// (benchmarks/stream.sh latency): it produces a JSON-lines file into an
// input topic at a steady rate, keyed by a field, while a read_committed
// consumer reads the alerts topic that a running `cepheus run
// -alerts-topic` writes. An alert's latency is the time from the moment
// the last of its matched events was handed to the producer to the moment
// the consumer received the alert (so it includes the producer's append,
// the engine, the checkpoint's transaction and the consumer's poll). It
// prints the count and the percentiles.
//
//	kafkalatency -brokers B -topic T -alerts A -events F [-rate 20000] [-key card_id]
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/cepheus-cep/cepheus/cep"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "kafkalatency:", err)
		os.Exit(1)
	}
}

func run() error {
	brokers := flag.String("brokers", os.Getenv("CEPHEUS_KAFKA_BROKERS"), "bootstrap brokers")
	topic := flag.String("topic", "", "input topic (it must exist: cepheus run reads it)")
	alerts := flag.String("alerts", "", "alerts topic cepheus run writes")
	events := flag.String("events", "", "JSON-lines events with an event_id field")
	rate := flag.Int("rate", 20000, "events per second")
	key := flag.String("key", "card_id", "the field the input records are keyed by")
	wait := flag.Duration("wait", 10*time.Second, "how long the alerts topic must stay quiet after the input, to end")
	flag.Parse()
	if *topic == "" || *alerts == "" || *events == "" || *brokers == "" {
		return errors.New("-brokers, -topic, -alerts and -events are required")
	}
	bs := strings.Split(*brokers, ",")
	data, err := os.ReadFile(*events)
	if err != nil {
		return err
	}
	lines := bytes.SplitAfter(data, []byte("\n"))
	if len(lines[len(lines)-1]) == 0 {
		lines = lines[:len(lines)-1]
	}

	// The consumer: every line it writes is timestamped on arrival.
	ctx := context.Background()
	arrivals := &arrivalWriter{}
	consumed := make(chan error, 1)
	go func() {
		_, err := cep.KafkaConsume(ctx, cep.KafkaConsumeConfig{Brokers: bs, Topic: *alerts, Idle: *wait}, arrivals)
		consumed <- err
	}()

	// The producer, paced: every millisecond the lines due by then.
	sent := make(map[string]time.Time, len(lines))
	pr, pw := io.Pipe()
	produced := make(chan error, 1)
	go func() {
		_, err := cep.KafkaProduce(ctx, cep.KafkaProduceConfig{Brokers: bs, Topic: *topic, KeyField: *key}, pr)
		produced <- err
	}()
	start := time.Now()
	for i, l := range lines {
		if due := start.Add(time.Duration(i) * time.Second / time.Duration(*rate)); time.Until(due) > 0 {
			time.Sleep(time.Until(due))
		}
		if _, err := pw.Write(l); err != nil {
			return err
		}
		if id := eventID(l); id != "" {
			sent[id] = time.Now()
		}
	}
	pw.Close()
	if err := <-produced; err != nil {
		return err
	}
	took := time.Since(start)
	if err := <-consumed; err != nil {
		return err
	}

	var lat []time.Duration
	missing := 0
	for _, a := range arrivals.take() {
		var al struct {
			Matched map[string][]map[string]any `json:"matched"`
		}
		if err := json.Unmarshal(a.line, &al); err != nil {
			return fmt.Errorf("alert %q: %w", a.line, err)
		}
		var last time.Time
		for _, evs := range al.Matched {
			for _, ev := range evs {
				id, _ := ev["event_id"].(string)
				if t, ok := sent[id]; ok && t.After(last) {
					last = t
				}
			}
		}
		if last.IsZero() {
			missing++
			continue
		}
		lat = append(lat, a.at.Sub(last))
	}
	if len(lat) == 0 {
		return errors.New("no alert arrived")
	}
	slices.Sort(lat)
	p := func(q float64) time.Duration {
		return lat[min(len(lat)-1, int(q*float64(len(lat))))].Round(time.Millisecond)
	}
	fmt.Printf("%d events in %.1fs (%.0f/s), %d alerts: latency p50 %v  p90 %v  p99 %v  max %v",
		len(lines), took.Seconds(), float64(len(lines))/took.Seconds(), len(lat), p(0.5), p(0.9), p(0.99), lat[len(lat)-1].Round(time.Millisecond))
	if missing > 0 {
		fmt.Printf(" (%d alerts without a known event)", missing)
	}
	fmt.Println()
	return nil
}

// eventID is the value of the line's "event_id" field, "" without one.
func eventID(l []byte) string {
	const f = `"event_id":"`
	i := bytes.Index(l, []byte(f))
	if i < 0 {
		return ""
	}
	rest := l[i+len(f):]
	j := bytes.IndexByte(rest, '"')
	if j < 0 {
		return ""
	}
	return string(rest[:j])
}

// arrivalWriter keeps the lines written to it with the time each arrived.
type arrivalWriter struct {
	mu    sync.Mutex
	part  []byte
	lines []arrival
}

type arrival struct {
	at   time.Time
	line []byte
}

func (w *arrivalWriter) Write(b []byte) (int, error) {
	now := time.Now()
	w.mu.Lock()
	defer w.mu.Unlock()
	data := append(w.part, b...)
	w.part = nil
	for len(data) > 0 {
		i := bytes.IndexByte(data, '\n')
		if i < 0 {
			w.part = slices.Clone(data)
			break
		}
		w.lines = append(w.lines, arrival{at: now, line: slices.Clone(data[:i])})
		data = data[i+1:]
	}
	return len(b), nil
}

func (w *arrivalWriter) take() []arrival {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.lines
}
