package runtime_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/cepheus-cep/cepheus/event"
	"github.com/cepheus-cep/cepheus/event/jsonev"
	"github.com/cepheus-cep/cepheus/runtime"
	"github.com/cepheus-cep/cepheus/runtime/state"
)

// describer is a KeyedOperator that emits a description of what it
// receives, and has no state.
type describer struct{}

func (describer) ProcessElement(ev *event.Event, ts event.Time, out runtime.Collector[string]) error {
	return out.Collect(fmt.Sprintf("line %d: %v %v", ev.Seq, ev.Fields, ts))
}

func (describer) ProcessWatermark(w event.Watermark, out runtime.Collector[string]) error {
	return out.Collect(fmt.Sprint("watermark ", w))
}

func (describer) Snapshot(state.Writer) error { return nil }
func (describer) Restore(state.Reader) error  { return nil }

// printer is the collector: it prints the descriptions.
type printer struct{}

func (printer) Collect(s string) error {
	_, err := fmt.Println(s)
	return err
}

// A backtest in miniature: JSON lines in, events and watermarks out, bad
// lines to a dead-letter stream.
func ExampleSubtask() {
	input := `{"card":"c1","amount":12.5,"ts":"2024-05-01T12:00:00Z"}
{"card":"c2","amount":3,"ts":1714564801000}

{"amount":1,"ts":1714564802000}
{"card":"c1","amount":99.9,"ts":"2024-05-01T12:00:05.5Z"}
`
	schema := event.MustSchema(
		event.Field{Name: "card", Kind: event.KindString},
		event.Field{Name: "amount", Kind: event.KindFloat},
	)
	src, _ := runtime.NewFileSource(strings.NewReader(input), "example", runtime.SourceConfig{})
	dec, _ := jsonev.NewDecoder(jsonev.Config{Schema: schema, TimeField: "ts", Required: []string{"card"}})
	wm, _ := runtime.NewWatermarkGenerator(time.Second, 1)
	dead := runtime.NewDeadLetterWriter(os.Stdout)
	st, _ := runtime.NewSubtask(runtime.SubtaskConfig[string]{
		Source: src, Decoder: dec, Watermarks: wm,
		Operators: []runtime.KeyedOperator[string]{describer{}}, Output: printer{},
		DeadLetter: dead,
	})
	if err := st.Run(context.Background()); err != nil {
		fmt.Println(err)
	}
	dead.Close()
	s := st.Stats()
	fmt.Printf("records %d, decoded %d, dead %d\n", s.Records, s.Decoded, s.Dead)
	// Output:
	// line 1: ["c1" 12.5] 2024-05-01T12:00:00.000Z
	// watermark 2024-05-01T11:59:58.999Z
	// line 2: ["c2" 3] 2024-05-01T12:00:01.000Z
	// watermark 2024-05-01T11:59:59.999Z
	// line 5: ["c1" 99.9] 2024-05-01T12:00:05.500Z
	// watermark 2024-05-01T12:00:04.499Z
	// watermark MAX
	// {"line":4,"offset":101,"reason":"missing required field \"card\"","data":"{\"amount\":1,\"ts\":1714564802000}"}
	// records 4, decoded 3, dead 1
}
