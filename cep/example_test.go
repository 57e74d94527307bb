package cep_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/cepheus-cep/cepheus/cep"
)

// A backtest: an engine over a bounded source, alerts as JSON lines, and
// the label statistics as an observer.
func ExampleNew() {
	rs, err := cep.CompileRuleset("example.cep", []byte(`
ruleset example
event time ts
rule big_then_foreign {
  severity high
  key card
  pattern {
    begin big where amount > 100
    followedBy foreign where country != big.country
    within 10m
  }
}
`))
	if err != nil {
		fmt.Println(err)
		return
	}
	labels := cep.NewLabels("is_fraud", "")
	engine, err := cep.New(
		cep.WithRuleset(rs),
		cep.WithAlerts(os.Stdout),
		cep.WithOutOfOrderness(5*time.Second),
		cep.WithObservers(labels),
	)
	if err != nil {
		fmt.Println(err)
		return
	}
	src, _ := cep.NewEventSource(strings.NewReader(
		`{"ts":"2026-01-01T10:00:00Z","card":"c1","amount":500,"country":"US","is_fraud":true,"scenario":"lf"}
{"ts":"2026-01-01T10:02:00Z","card":"c1","amount":20,"country":"FR","is_fraud":true,"scenario":"lf"}
`), "events")
	sum, err := engine.Run(context.Background(), src)
	if err != nil {
		fmt.Println(err)
		return
	}
	ls := labels.Summary()
	fmt.Printf("%d events, %d alerts; %d labelled events, recall %.0f%%\n", sum.Decoded, sum.Alerts, ls.Labelled, 100*ls.Recall())
	// Output:
	// {"alert_id":"3658655feaae75d17dfbbc79fa6cb0e9","rule":"big_then_foreign","ruleset":"example","ruleset_version":"d43e523230c1a4a19c01b74a17acf1f844502d099432dc97409b384671a0c49b","rule_hash":"798826ad97c0dade91a01160e1078e521c3ae5114d0a7fa86d6fa77fbe3fcebc","severity":"high","key":{"card":"c1"},"detected_at":"2026-01-01T10:02:00.000Z","matched":{"big":[{"line":1,"amount":500,"card":"c1","country":"US","ts":"2026-01-01T10:00:00.000Z","is_fraud":true,"scenario":"lf"}],"foreign":[{"line":2,"amount":20,"card":"c1","country":"FR","ts":"2026-01-01T10:02:00.000Z","is_fraud":true,"scenario":"lf"}]},"emit":{}}
	// 2 events, 1 alerts; 2 labelled events, recall 100%
}

// A live job embedded in a program: the engine's rules over a file, the
// alerts committed exactly once into a directory, the state checkpointed
// into another, so that a second run over the same state resumes (here:
// finds the input read to its end).
func ExampleEngine_Stream() {
	dir, err := os.MkdirTemp("", "cep-example-")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(dir)
	events := filepath.Join(dir, "events.jsonl")
	if err := os.WriteFile(events, []byte(
		`{"ts":"2026-01-01T10:00:00Z","card":"c1","amount":500,"country":"US"}
{"ts":"2026-01-01T10:02:00Z","card":"c1","amount":20,"country":"FR"}
`), 0o644); err != nil {
		fmt.Println(err)
		return
	}
	rs, err := cep.CompileRuleset("example.cep", []byte(`
ruleset example
event time ts
rule big_then_foreign {
  key card
  pattern {
    begin big where amount > 100
    followedBy foreign where country != big.country
    within 10m
  }
}
`))
	if err != nil {
		fmt.Println(err)
		return
	}
	engine, err := cep.New(cep.WithRuleset(rs))
	if err != nil {
		fmt.Println(err)
		return
	}
	cfg := cep.StreamConfig{Events: events, StateDir: filepath.Join(dir, "state"), AlertsDir: filepath.Join(dir, "alerts")}
	// Code sees each alert too (at least once: deduplicate by a.ID).
	cfg.OnAlert = func(a *cep.Alert) error {
		fmt.Printf("alert of %s for %s %v: %d stages\n", a.Rule, a.KeyFields[0], a.Key[0], len(a.Matched))
		return nil
	}
	res, err := engine.Stream(context.Background(), cfg)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("%d records, %d alert, finished %v\n", res.Records, res.Alerts, res.Finished)
	files, _ := filepath.Glob(filepath.Join(cfg.AlertsDir, "alerts-*.jsonl"))
	for _, f := range files {
		b, _ := os.ReadFile(f)
		fmt.Print(strings.Count(string(b), "\n"), " line in ", filepath.Base(cfg.AlertsDir), "\n")
	}
	res, err = engine.Stream(context.Background(), cfg)
	fmt.Printf("again: %v, already finished %v\n", err, res.AlreadyFinished)
	// Output:
	// alert of big_then_foreign for card "c1": 2 stages
	// 2 records, 1 alert, finished true
	// 1 line in alerts
	// again: <nil>, already finished true
}
