package state

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/cepheus-cep/cepheus/event"
)

// dump lists the records of op in groups as "group/key=value".
func dump(t *testing.T, r Reader, op OperatorID, groups KeyGroupRange) []string {
	t.Helper()
	var out []string
	for rec, err := range r.Records(op, groups) {
		if err != nil {
			t.Fatalf("Records: %v", err)
		}
		if rec.Key.Operator != op {
			t.Errorf("record %v of operator %q", rec.Key, op)
		}
		out = append(out, rec.Key.String()+"="+string(rec.Value))
	}
	return out
}

func TestMemPutOverwriteDelete(t *testing.T) {
	m := NewMem()
	k := func(op OperatorID, g KeyGroup, key string) Key {
		return Key{Operator: op, KeyGroup: g, Key: event.Key(key)}
	}
	val := []byte("v1")
	must(t, m.Put(k("a", 0, "x"), val))
	val[1] = '9' // Put copied it
	must(t, m.Put(k("a", 0, "y"), []byte("v2")))
	must(t, m.Put(k("a", 3, ""), []byte("g3")))
	must(t, m.Put(k("ab", 0, "x"), []byte("other operator")))
	must(t, m.Put(k("", 1, "z"), []byte("empty id")))
	must(t, m.Put(k("a", 0, "y"), []byte("v2'"))) // overwrite
	must(t, m.Delete(k("a", 0, "missing")))       // no error

	want := []string{`a/0/"x"=v1`, `a/0/"y"=v2'`, `a/3/""=g3`}
	if got := dump(t, m, "a", AllKeyGroups); !slices.Equal(got, want) {
		t.Errorf("records of a = %q, want %q", got, want)
	}
	if got := dump(t, m, "ab", AllKeyGroups); !slices.Equal(got, []string{`ab/0/"x"=other operator`}) {
		t.Errorf("records of ab = %q", got)
	}
	if got := dump(t, m, "", AllKeyGroups); !slices.Equal(got, []string{`/1/"z"=empty id`}) {
		t.Errorf("records of the empty id = %q", got)
	}
	if got := dump(t, m, "none", AllKeyGroups); len(got) != 0 {
		t.Errorf("records of an unknown operator = %q", got)
	}

	must(t, m.Delete(k("a", 0, "x")))
	if got := dump(t, m, "a", AllKeyGroups); !slices.Equal(got, []string{`a/0/"y"=v2'`, `a/3/""=g3`}) {
		t.Errorf("after delete = %q", got)
	}
	if m.Len() != 4 {
		t.Errorf("Len = %d, want 4", m.Len())
	}
}

func TestMemKeyGroupRange(t *testing.T) {
	m := NewMem()
	for _, g := range []KeyGroup{0, 1, 2, 7, 8, 65535} {
		must(t, m.Put(Key{Operator: "op", KeyGroup: g, Key: "k"}, []byte{byte(g)}))
	}
	groupsOf := func(r KeyGroupRange) []KeyGroup {
		var gs []KeyGroup
		for rec, err := range m.Records("op", r) {
			must(t, err)
			gs = append(gs, rec.Key.KeyGroup)
		}
		return gs
	}
	for _, c := range []struct {
		r    KeyGroupRange
		want []KeyGroup
	}{
		{AllKeyGroups, []KeyGroup{0, 1, 2, 7, 8, 65535}},
		{KeyGroupRange{1, 7}, []KeyGroup{1, 2, 7}},
		{KeyGroupRange{3, 6}, nil},
		{KeyGroupRange{8, 8}, []KeyGroup{8}},
		{KeyGroupRange{9, 65535}, []KeyGroup{65535}},
	} {
		if got := groupsOf(c.r); !slices.Equal(got, c.want) {
			t.Errorf("groups in %v = %v, want %v", c.r, got, c.want)
		}
	}
	// Breaking out of the loop stops the iteration.
	n := 0
	for range m.Records("op", AllKeyGroups) {
		n++
		break
	}
	if n != 1 {
		t.Errorf("iterations after break = %d", n)
	}
}

func TestMemSnapshotIsolated(t *testing.T) {
	m := NewMem()
	must(t, m.Put(Key{Operator: "op", Key: "a"}, []byte("1")))
	must(t, m.Put(Key{Operator: "op", Key: "b"}, []byte("1")))
	s1 := m.Snapshot()
	must(t, m.Put(Key{Operator: "op", Key: "a"}, []byte("2")))
	must(t, m.Delete(Key{Operator: "op", Key: "b"}))
	must(t, m.Put(Key{Operator: "op", Key: "c"}, []byte("2")))
	s2 := m.Snapshot()
	s3 := m.Snapshot() // no write in between: the same table
	must(t, m.Put(Key{Operator: "op", Key: "d"}, []byte("3")))

	if got, want := dump(t, s1, "op", AllKeyGroups), []string{`op/0/"a"=1`, `op/0/"b"=1`}; !slices.Equal(got, want) {
		t.Errorf("snapshot 1 = %q, want %q", got, want)
	}
	want2 := []string{`op/0/"a"=2`, `op/0/"c"=2`}
	if got := dump(t, s2, "op", AllKeyGroups); !slices.Equal(got, want2) {
		t.Errorf("snapshot 2 = %q, want %q", got, want2)
	}
	if got := dump(t, s3, "op", AllKeyGroups); !slices.Equal(got, want2) {
		t.Errorf("snapshot 3 = %q, want %q", got, want2)
	}
	if got := dump(t, m, "op", AllKeyGroups); len(got) != 3 || s1.Len() != 2 {
		t.Errorf("live = %q, snapshot 1 has %d records", got, s1.Len())
	}
}

func TestKeyEncoding(t *testing.T) {
	keys := []Key{
		{Operator: "", KeyGroup: 5, Key: "z"},
		{Operator: "a", KeyGroup: 0, Key: ""},
		{Operator: "a", KeyGroup: 0, Key: "\x00"},
		{Operator: "a", KeyGroup: 0, Key: "b"},
		{Operator: "a", KeyGroup: 1, Key: ""},
		{Operator: "a", KeyGroup: 256, Key: ""},
		{Operator: "b", KeyGroup: 0, Key: ""},
		{Operator: "ab", KeyGroup: 0, Key: ""},
	}
	for i, k := range keys {
		enc := AppendKey(nil, k)
		got, err := DecodeKey(enc)
		if err != nil || got != k {
			t.Errorf("DecodeKey(AppendKey(%v)) = %v, %v", k, got, err)
		}
		if i > 0 {
			prev := keys[i-1]
			if Compare(prev, k) >= 0 || string(AppendKey(nil, prev)) >= string(enc) {
				t.Errorf("%v should sort before %v, in Compare and encoded", prev, k)
			}
		}
		if Compare(k, k) != 0 {
			t.Errorf("Compare(%v, itself) != 0", k)
		}
	}
	for _, bad := range [][]byte{nil, {3, 'a'}, {1, 'a', 0}} {
		if _, err := DecodeKey(bad); !errors.Is(err, ErrCorruptKey) {
			t.Errorf("DecodeKey(%q) = %v, want ErrCorruptKey", bad, err)
		}
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func TestGroupOf(t *testing.T) {
	// FNV-1a 64 of "" is its offset basis, of "a" a published value.
	if got, want := GroupOf("", 1<<15), KeyGroup(14695981039346656037%(1<<15)); got != want {
		t.Errorf("GroupOf(\"\") = %d, want %d", got, want)
	}
	if got, want := GroupOf("a", 1000), KeyGroup(0xaf63dc4c8601ec8c%1000); got != want {
		t.Errorf("GroupOf(\"a\") = %d, want %d", got, want)
	}
	seen := map[KeyGroup]int{}
	for i := range 10000 {
		g := GroupOf(event.Key(fmt.Sprint("card-", i)), DefaultKeyGroups)
		if int(g) >= DefaultKeyGroups {
			t.Fatalf("group %d out of range", g)
		}
		seen[g]++
	}
	for g := range KeyGroup(DefaultKeyGroups) {
		if n := seen[g]; n < 40 || n > 120 {
			t.Errorf("group %d holds %d of 10000 keys: not spread", g, n)
		}
	}
}
