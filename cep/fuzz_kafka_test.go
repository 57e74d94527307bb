package cep

import (
	"bytes"
	"encoding/binary"
	"strconv"
	"strings"
	"testing"

	"github.com/cepheus-cep/cepheus/event"
)

// FuzzRepMarker decodes arbitrary bytes as a repartition topic's
// marker: it fails, or decodes to a marker that encodes to the input
// itself (the format has one spelling of each marker but for varints
// with extra bytes, which a longer input may use).
func FuzzRepMarker(f *testing.F) {
	for _, m := range []struct {
		up int32
		u  repUpstream
	}{{0, repUpstream{WM: event.Watermark(event.MinTime)}}, {7, repUpstream{WM: 1700000000000, Idle: true}}, {1<<31 - 1, repUpstream{WM: -1, Final: true, Idle: true}}} {
		f.Add(appendRepMarker(nil, m.up, m.u))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		up, u, err := decodeRepMarker(b)
		if err != nil {
			return
		}
		if n, _ := binary.Uvarint(b[2:]); n != uint64(up) {
			t.Fatalf("the marker %x of upstream %d decodes to upstream %d", b, n, up)
		}
		enc := appendRepMarker(nil, up, u)
		if len(enc) > len(b) || len(enc) == len(b) && !bytes.Equal(enc, b) {
			t.Fatalf("the marker %x decodes to upstream %d, %+v, which encodes as %x", b, up, u, enc)
		}
		if up2, u2, err := decodeRepMarker(enc); err != nil || up2 != up || u2 != u {
			t.Fatalf("%x decodes to %d, %+v (%v), want %d, %+v", enc, up2, u2, err, up, u)
		}
	})
}

// FuzzRepEvent decodes arbitrary bytes as a repartition topic's event
// record: it fails, or decodes to a record that encodes to an equal one.
func FuzzRepEvent(f *testing.F) {
	f.Add(appendRepEvent(nil, 42, []byte(`{"ts":1,"card":"c"}`)))
	f.Add(appendRepEnriched(nil, 1<<40, 0xfeedface, []byte{1, 3, 5, 'x', 0}, []byte(`{"ts":2}`)))
	f.Fuzz(func(t *testing.T, b []byte) {
		e, err := decodeRepEvent(b)
		if err != nil {
			return
		}
		var enc []byte
		if e.enriched {
			enc = appendRepEnriched(nil, e.seq, e.sigHash, e.values, e.raw)
		} else {
			enc = appendRepEvent(nil, e.seq, e.raw)
		}
		e2, err := decodeRepEvent(enc)
		if err != nil || e2.seq != e.seq || e2.enriched != e.enriched || e2.sigHash != e.sigHash ||
			!bytes.Equal(e2.values, e.values) || !bytes.Equal(e2.raw, e.raw) {
			t.Fatalf("%+v encodes as %x, which decodes to %+v (%v)", e, enc, e2, err)
		}
	})
}

// FuzzJoinChangelog joins a changelog's record of key k, value v, with
// the record of its first chunk: a chunked value that joins is one of
// two chunks (the second is the only other record), its bytes those of
// both.
func FuzzJoinChangelog(f *testing.F) {
	f.Add(append([]byte{changelogWhole}, "state"...), []byte(nil))
	f.Add(append(binary.AppendUvarint([]byte{changelogChunked}, 2), "sta"...), []byte("te"))
	f.Add(append(binary.AppendUvarint([]byte{changelogChunked}, 3), "s"...), []byte("ta"))
	f.Fuzz(func(t *testing.T, v, chunk []byte) {
		k := "\x03cep\x00\x01card"
		recs := map[string][]byte{k: v, string(chunkKey([]byte(k), 1)): chunk}
		out, err := joinChangelog(recs)
		if err != nil {
			return
		}
		if len(out) != 1 {
			t.Fatalf("%d records out of one and its chunk", len(out))
		}
		switch got := out[k]; v[0] {
		case changelogWhole:
			if !bytes.Equal(got, v[1:]) {
				t.Fatalf("a whole value %x joins as %x", v, got)
			}
		case changelogChunked:
			n, m := binary.Uvarint(v[1:])
			if want := append(v[1+m:len(v):len(v)], chunk...); n != 2 || !bytes.Equal(got, want) {
				t.Fatalf("a value of %d chunks, %x then %x, joins as %x", n, v, chunk, got)
			}
		default:
			t.Fatalf("a value of kind %d joins", v[0])
		}
	})
}

// FuzzApplyValues applies arbitrary bytes as what the lookups gave an
// event (a repartition record's values): they fail, or set each lookup
// field to null or a value of its declared kind, which appendValues
// gives back.
func FuzzApplyValues(f *testing.F) {
	e, st := repLookupEngine(f)
	ev := event.New(e.schema.Len())
	f.Add(st.appendValues(nil, ev))
	for _, fields := range st.fields {
		for _, lf := range fields {
			switch lf.Kind {
			case event.KindString:
				ev.Fields[lf.Slot] = event.String("gold")
			case event.KindFloat:
				ev.Fields[lf.Slot] = event.Float(2.5)
			case event.KindInt:
				ev.Fields[lf.Slot] = event.Int(7)
			}
		}
	}
	f.Add(st.appendValues(nil, ev))
	f.Fuzz(func(t *testing.T, b []byte) {
		ev := event.New(e.schema.Len())
		if err := st.applyValues(ev, b); err != nil {
			return
		}
		for _, fields := range st.fields {
			for _, lf := range fields {
				if v := ev.Field(lf.Slot); !v.IsNull() && v.Kind() != lf.Kind {
					t.Fatalf("%x sets lookup field %s (%v) to %v", b, lf.Name, lf.Kind, v)
				}
			}
		}
		again := event.New(e.schema.Len())
		if err := st.applyValues(again, st.appendValues(nil, ev)); err != nil {
			t.Fatalf("the values of %x do not apply again: %v", b, err)
		}
		for i := range ev.Fields {
			if !sameValue(ev.Fields[i], again.Fields[i]) {
				t.Fatalf("field %d is %v, then %v", i, ev.Fields[i], again.Fields[i])
			}
		}
	})
}

// FuzzTxnMetadata parses arbitrary strings as the metadata of committed
// offsets: a string it takes is exactly what the engine writes for what
// it read (txnMetadata, or "cepheus chk=N" without an instance, as the
// first transactional builds wrote): one spelling of each checkpoint id,
// no sign, no leading zero. The seeds are the engine's own metadata and
// near misses.
func FuzzTxnMetadata(f *testing.F) {
	for _, s := range []string{
		txnMetadata(1, "a", false), txnMetadata(42, "eu-west-1.node_7", true), txnMetadata(1<<63-1, "0", false),
		"cepheus chk=7", "cepheus chk=+5 inst=a", "cepheus chk=05 inst=a", "cepheus chk=-5 inst=a",
		"cepheus chk=0 inst=a", "cepheus chk= 5 inst=a", "cepheus chk=5_0 inst=a", "cepheus chk=0x5 inst=a",
		"cepheus chk=9223372036854775808 inst=a", "cepheus chk=+5", "cepheus chk=05 inst=a final",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		id, inst, ok := parseTxnMetadata(s)
		if !ok {
			return
		}
		want := txnMetadata(id, inst, txnFinal(s))
		if !strings.Contains(s, " inst=") {
			want = "cepheus chk=" + strconv.FormatInt(id, 10)
		}
		if s != want {
			t.Fatalf("%q is taken as checkpoint %d of instance %q, which the engine writes %q", s, id, inst, want)
		}
	})
}
