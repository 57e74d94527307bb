package cond

import (
	"testing"

	"github.com/cepheus-cep/cepheus/event"
)

// benchSchema is a card transaction.
var benchSchema = event.MustSchema(
	event.Field{Name: "customer_id", Kind: event.KindString},
	event.Field{Name: "amount", Kind: event.KindFloat},
	event.Field{Name: "country", Kind: event.KindString},
	event.Field{Name: "channel", Kind: event.KindString},
	event.Field{Name: "merchant", Kind: event.KindString},
	event.Field{Name: "attempts", Kind: event.KindInt},
)

func benchEvent() *event.Event {
	return &event.Event{Fields: []event.Value{
		event.String("c1"), event.Float(6000), event.String("FR"), event.String("web"),
		event.String("amz-eu"), event.Int(2),
	}}
}

const (
	benchSimple   = `amount > 5000`
	benchCompound = `amount > 5000 && country != "US" && (channel == "web" || merchant startsWith "amz") && attempts * 2 < 10`
)

func benchCompiled(b *testing.B, src string) {
	c, err := CompileBoolExpr(src, &Env{Schema: benchSchema, Declared: true})
	if err != nil {
		b.Fatal(err)
	}
	if !c.Fast() {
		b.Fatalf("%s is not compiled natively (%s)", src, c.Fallback())
	}
	e := benchEvent()
	b.ReportAllocs()
	for b.Loop() {
		if !c.Eval(e, nil) {
			b.Fatal("Eval = false")
		}
	}
}

func benchVM(b *testing.B, src string) {
	c, err := CompileCondition(src, benchSchema, nil)
	if err != nil {
		b.Fatal(err)
	}
	e := benchEvent()
	b.ReportAllocs()
	for b.Loop() {
		if !c.Eval(e, nil) {
			b.Fatal("Eval = false")
		}
	}
}

func BenchmarkCondSimple(b *testing.B)     { benchCompiled(b, benchSimple) }
func BenchmarkCondSimpleVM(b *testing.B)   { benchVM(b, benchSimple) }
func BenchmarkCondCompound(b *testing.B)   { benchCompiled(b, benchCompound) }
func BenchmarkCondCompoundVM(b *testing.B) { benchVM(b, benchCompound) }

// BenchmarkCondStageAggregate reads earlier stages: the sum of a field over
// the events of a loop, compared with the event under test.
func BenchmarkCondStageAggregate(b *testing.B) {
	env := &Env{Schema: benchSchema, Declared: true, Stages: []string{"small", "big"}}
	c, err := CompileBoolExpr(`amount > 3 * avg(small.amount) && count(small) >= 3`, env)
	if err != nil {
		b.Fatal(err)
	}
	var small []*event.Event
	for i := range 5 {
		e := benchEvent()
		e.Fields[1] = event.Float(float64(10 + i))
		small = append(small, e)
	}
	fr := frame{ev: benchEvent(), stages: matchStages{small, nil}}
	b.ReportAllocs()
	for b.Loop() {
		if ok, err := c.prog.evalBool(fr); !ok || err != nil {
			b.Fatal("evalBool = false", err)
		}
	}
}
