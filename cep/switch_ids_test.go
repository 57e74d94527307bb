package cep

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/cepheus-cep/cepheus/event"
)

// idField is a field the versions of TestSwitchIDsRandomSchemas may
// declare, with its one type: a field declared by two versions has the
// same type in both.
type idField struct{ name, typ string }

// idFields are the fields of idInput's events. ts, card, type, amount and
// country are read by the rules, the others by none.
var idFields = []idField{
	{"ts", "time"}, {"card", "string"}, {"type", "string"}, {"amount", "float"}, {"country", "string"},
	{"merchant", "string"}, {"seen", "time"}, {"vip", "bool"}, {"score", "int"},
}

// idInput is deployInput's events with the fields of idFields that it
// lacks.
func idInput(n int) string {
	var b strings.Builder
	for i, l := range strings.SplitAfter(deployInput(n), "\n") {
		if !strings.HasPrefix(l, `{"ts":`) {
			b.WriteString(l)
			continue
		}
		extra := fmt.Sprintf(`,"merchant":"m%d","seen":"2026-01-0%dT08:00:00Z","vip":%v,"score":%d}`, i%5, 1+i%7, i%3 == 0, i%11)
		b.WriteString(strings.Replace(l, "}", extra, 1))
	}
	return b.String()
}

// idRules is the rules of the versions of TestSwitchIDsRandomSchemas:
// keep, and lonely, which raises timed-out partial matches.
const idRules = deployKeep + `
rule lonely {
  key card
  pattern {
    begin a where type == "auth" && amount > 550
    followedBy b where type == "capture" && country == a.country
    within 2m
  }
  timeout {
    severity low
  }
}
`

// randomIDVersion is the source of a version of ruleset held: its rules
// (idRules), the lookup holder or not, and a schema of the fields the
// rules read and a random choice of the others from extras, in a random
// order; or none (inferred: the fields the rules read).
func randomIDVersion(rnd *rand.Rand, extras []idField, inferred bool) string {
	var b strings.Builder
	b.WriteString("ruleset held\n\nevent time ts\n")
	if !inferred {
		fields := slices.Clone(idFields[:5])
		for _, f := range extras {
			if rnd.IntN(2) == 0 {
				fields = append(fields, f)
			}
		}
		rnd.Shuffle(len(fields), func(i, j int) { fields[i], fields[j] = fields[j], fields[i] })
		b.WriteString("\nschema {\n")
		for _, f := range fields {
			fmt.Fprintf(&b, "  %s: %s\n", f.name, f.typ)
		}
		b.WriteString("}\n")
	}
	if rnd.IntN(2) == 0 {
		b.WriteString(heldLookup)
	}
	b.WriteString(idRules)
	return b.String()
}

// TestSwitchIDsRandomSchemas: after a switch (a deploy into a job that
// runs another version's layout, a restart with another file), every
// alert of the new version has the id that a backtest of that version
// alone gives the same match (rules.Ruleset.IDSlots: the version's own
// input fields, in its own order, wherever the layout put them), timed-
// out partial matches included; and every alert of the version before
// the switch has the id of a backtest of that version. The versions
// declare their fields in random orders, some of the others' fields, or
// none (inferred); a field's type is the same in every version that
// declares it, and the second declares no input field the first lacks
// (an event held across the switch has every field the second reads,
// decoded alike). The matches of the events read after the switch are
// all raised (before the fix of decoderConfig, those of a second version
// without the first's time field seen were not: every event after the
// switch was a dead letter).
func TestSwitchIDsRandomSchemas(t *testing.T) {
	input := idInput(600)
	for seed := range uint64(24) {
		rnd := rand.New(rand.NewPCG(seed, 5))
		inferred := rnd.IntN(3) == 0
		v1 := randomIDVersion(rnd, idFields[5:], inferred)
		rs1 := loadRules(t, v1)
		// v2 declares some of v1's fields (all of them when v1 infers
		// its schema: the rules' fields alone), or infers its own.
		var extras []idField
		for _, f := range idFields[5:] {
			if _, ok := rs1.Schema.Slot(f.name); ok && rs1.Declared {
				extras = append(extras, f)
			}
		}
		v2 := randomIDVersion(rnd, extras, inferred)
		sw := []heldSwitch{switchDeploy, switchRestart}[rnd.IntN(2)]
		t.Run(fmt.Sprintf("seed %d, %v", seed, sw), func(t *testing.T) {
			got, w, before := runHeldSwitch(t, v1, v2, sw, input, 1)
			want := map[string]map[string]string{} // by version: match -> id
			for _, src := range []string{v1, v2} {
				rs := loadRules(t, src)
				want[rs.Hash] = map[string]string{}
				for _, l := range heldBacktest(t, src, input) {
					m, id, _ := idMatch(t, l)
					want[rs.Hash][m] = id
				}
			}
			h1, h2 := rs1.Hash, loadRules(t, v2).Hash
			checked := map[string]int{}
			seen := map[string]bool{}
			for _, l := range got {
				m, id, version := idMatch(t, l)
				seen[m] = true
				if version != h1 && version != h2 {
					t.Fatalf("an alert of version %.12s, neither %.12s nor %.12s", version, h1, h2)
				}
				which := "v1"
				if version == h2 {
					which = "v2"
				}
				wid, ok := want[version][m]
				if !ok {
					// A changed rule's match that the switch cut (its
					// version before took its first events, the one after
					// starts at w): not one a backtest gives.
					continue
				}
				checked[which]++
				if wid != id {
					t.Errorf("%s alert %s: id %s, a backtest of %s gives %s\nv1:\n%s\nv2:\n%s", which, m, id, which, wid, v1, v2)
				}
			}
			t.Logf("switch at %v: %d alerts; ids checked: %v", w, len(got), checked)
			if checked["v2"] == 0 {
				t.Fatal("no alert of the version after the switch checked")
			}
			// Every rule is kept (the versions declare the fields the
			// rules read alike): each match of a backtest of v2 whose
			// events were all read after the switch is raised.
			for _, l := range heldBacktest(t, v2, input) {
				a := parseHeldAlert(t, l)
				after := a.first(t) > w
				a.events(t, func(_ map[string]any, _ event.Time, line int64) { after = after && line > int64(before) })
				if m, _, _ := idMatch(t, l); after && !seen[m] {
					t.Errorf("the match %s of a backtest of v2, of events read after the switch, is not raised", m)
				}
			}
		})
	}
}
