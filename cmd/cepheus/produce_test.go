package main

import (
	"strings"
	"testing"
)

// TestProduceKeyFieldMissing: -key naming a field that the first record
// lacks while it has one of a close name is refused before anything is
// written (it gave every record a null key, exit 0); a field of the first
// record, one of no close name, stdin and no -key pass.
func TestProduceKeyFieldMissing(t *testing.T) {
	dir := t.TempDir()
	events := writeFile(t, dir, "e.jsonl", `{"ts": "2026-01-01T00:00:00Z", "card_id": "c1", "amount": 5}`+"\n"+`{"ts": "2026-01-01T00:00:01Z", "cardid": "c2"}`+"\n")
	for _, c := range []struct {
		events, key, want string
	}{
		{events, "cardid", "-key cardid: the first record of " + events + " has no field cardid (did you mean card_id?)"},
		{events, "card_id", ""},
		{events, "merchant_id", ""},
		{events, "", ""},
		{"-", "cardid", ""},
	} {
		if got := keyFieldMissing(c.events, c.key); got != c.want {
			t.Errorf("keyFieldMissing(%s, %q) = %q, want %q", c.events, c.key, got, c.want)
		}
	}
	code, _, errOut := cepheus(t, "produce", "-brokers", "127.0.0.1:9", "-topic", "t", "-key", "cardid", "-events", events)
	if want := "did you mean card_id?"; code != 2 || !strings.Contains(errOut, want) {
		t.Errorf("cepheus produce -key cardid: exit %d\n%s\nwant exit 2 and %q", code, errOut, want)
	}
}
