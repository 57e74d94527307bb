package rules

import (
	"fmt"
	"strings"
	"testing"

	"github.com/cepheus-cep/cepheus/event"
)

const lookupSrc = `ruleset l
event time ts
schema {
  ts: time
  customer_id: string
  country: string
}
# who the customer is
lookup customer {
  key customer_id
  fields {
    home_country: string default "" # from the profile
    tier: int default 0
    opened: time
  }
  on failure retry 2 then closed
  timeout 80ms
}
rule abroad {
  key customer_id
  pattern {
    begin a where country != customer.home_country && customer.home_country != ""
    followedBy b where country == a.country
  }
  emit {
    home: a.customer.home_country
  }
}
rule plain {
  key customer_id
  pattern {
    begin a where country == "FR"
  }
}
`

func TestLookupCompile(t *testing.T) {
	rs, err := Load("l.cep", []byte(lookupSrc))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := strings.Join(rs.Schema.Names(), ","), "ts,customer_id,country,customer.home_country,customer.tier,customer.opened"; got != want {
		t.Fatalf("schema %s, want %s", got, want)
	}
	if len(rs.Lookups) != 1 {
		t.Fatalf("%d lookups, want 1", len(rs.Lookups))
	}
	l := rs.Lookups[0]
	if l.Name != "customer" || strings.Join(l.KeyFields, ",") != "customer_id" || l.KeySlots[0] != 1 ||
		!l.Closed || l.Retries != 2 || l.Timeout.Milliseconds() != 80 {
		t.Errorf("lookup %+v", l)
	}
	want := []LookupField{
		{Name: "home_country", Slot: 3, Kind: event.KindString, Default: event.String("")},
		{Name: "tier", Slot: 4, Kind: event.KindInt, Default: event.Int(0)},
		{Name: "opened", Slot: 5, Kind: event.KindInt, Time: true, Default: event.Null},
	}
	for i, f := range l.Fields {
		if f.Name != want[i].Name || f.Slot != want[i].Slot || f.Kind != want[i].Kind || f.Time != want[i].Time || !f.Default.Equal(want[i].Default) {
			t.Errorf("field %d = %+v, want %+v", i, f, want[i])
		}
	}
	if strings.Contains(l.Source, "#") || !strings.HasPrefix(l.Source, "lookup customer {\n  key customer_id\n") {
		t.Errorf("Source =\n%s", l.Source)
	}
	// The condition reads the lookup's slots.
	r := rs.Rule("abroad")
	ev := &event.Event{Fields: []event.Value{event.Int(0), event.String("c1"), event.String("FR"), event.String("US"), event.Int(1), event.Null}}
	if len(r.conds) == 0 || !r.conds[0].Eval(ev, nil) {
		t.Errorf("the condition of a is false over a customer from US buying in FR")
	}
	ev.Fields[3] = event.String("FR")
	if r.conds[0].Eval(ev, nil) {
		t.Errorf("the condition of a is true over a customer from FR buying in FR")
	}
	// A change of the lookup changes the hash of the rules that read it,
	// not of the others.
	changed, err := Load("l.cep", []byte(strings.Replace(lookupSrc, `tier: int default 0`, `tier: int default 1`, 1)))
	if err != nil {
		t.Fatal(err)
	}
	if changed.Rule("abroad").Hash == r.Hash || changed.Rule("plain").Hash != rs.Rule("plain").Hash {
		t.Errorf("hashes after a lookup change: abroad changed %v (want true), plain changed %v (want false)",
			changed.Rule("abroad").Hash != r.Hash, changed.Rule("plain").Hash != rs.Rule("plain").Hash)
	}
}

// TestLookupInferred: without a declared schema, the lookup's key field
// joins the inferred schema and its fields follow, typed.
func TestLookupInferred(t *testing.T) {
	src := `ruleset l
event time ts
lookup card {
  key card_id
  fields {
    issuer: string default "?"
  }
}
rule r {
  key account
  pattern {
    begin a where card.issuer == "x" && amount > 1
  }
}
`
	rs, err := Load("l.cep", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := strings.Join(rs.Schema.Names(), ","), "account,amount,card_id,ts,card.issuer"; got != want {
		t.Errorf("schema %s, want %s", got, want)
	}
	if k := rs.Schema.Field(4).Kind; k != event.KindString {
		t.Errorf("card.issuer kind %v, want string", k)
	}
}

// TestIDSlots: an alert id hashes the file's input fields in its order
// (Ruleset.IDSlots): not a lookup's fields, nor, over a layout, the fields
// only the layout has, wherever the layout put the file's own.
func TestIDSlots(t *testing.T) {
	rs, err := Load("l.cep", []byte(lookupSrc))
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(rs.IDSlots); got != "[0 1 2]" {
		t.Fatalf("IDSlots %s, want [0 1 2] (ts, customer_id, country)", got)
	}
	// The layout of a job that ran another version first: its own lookup,
	// an input field this file lacks, and this file's fields in another
	// order.
	layout := event.MustSchema(event.Field{Name: "country"}, event.Field{Name: "holder.tier"},
		event.Field{Name: "ts"}, event.Field{Name: "merchant"}, event.Field{Name: "customer_id"})
	rs, err = LoadLayout("l.cep", []byte(lookupSrc), layout)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, slot := range rs.IDSlots {
		names = append(names, rs.Schema.Field(slot).Name)
	}
	if got, want := strings.Join(names, ","), "ts,customer_id,country"; got != want {
		t.Fatalf("IDSlots over the layout name %s, want %s (slots %v of %v)", got, want, rs.IDSlots, rs.Schema.Names())
	}
}
