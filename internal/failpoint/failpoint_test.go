package failpoint

import (
	"strings"
	"testing"
	"time"
)

// The tests' own points, besides the code's.
func init() {
	for _, p := range []string{"p", "other", "a.b-c"} {
		points[p] = true
	}
}

// TestParse: what each form of CEPHEUS_FAILPOINT arms, and that a count
// on a stop or a sleep is refused with the spec named.
func TestParse(t *testing.T) {
	for _, c := range []struct {
		v    string
		want spec
		err  bool
	}{
		{v: "p", want: spec{name: "p", nth: 1}},
		{v: "p@3", want: spec{name: "p", nth: 3}},
		{v: "p/stop-when=/tmp/x", want: spec{name: "p", nth: 1, stopWhen: "/tmp/x"}},
		{v: "p/sleep=20ms", want: spec{name: "p", nth: 1, sleepFor: 20 * time.Millisecond}},
		{v: "a.b-c@12", want: spec{name: "a.b-c", nth: 12}},
		{v: "p/sleep=soon", err: true},
		{v: "p/sleep=0", err: true},
		{v: "p/sleep=-1s", err: true},
		{v: "p/stop-when=", err: true},
		{v: "p@3/stop-when=/tmp/x", err: true},
		{v: "p@3/sleep=20ms", err: true},
		{v: "p@x/sleep=20ms", err: true},
		{v: "p@0", err: true},
		{v: "p@-1", err: true},
		{v: "p@x", err: true},
		{v: "p@", err: true},
		{v: "@3", err: true},
		{v: "p@x@3", err: true},
		{v: "/sleep=20ms", err: true},
		{v: "/stop-when=/tmp/x", err: true},
		{v: "kafka.before-commit@2", want: spec{name: "kafka.before-commit", nth: 2}},
		{v: "kafka.befor-commit@2", err: true},
		{v: "sink.commit.renamed/sleep=1s", want: spec{name: "sink.commit.renamed", nth: 1, sleepFor: time.Second}},
		{v: "sink.commit/sleep=1s", err: true},
		{v: "q", err: true},
	} {
		got, err := parse(c.v)
		if c.err {
			if err == nil || !strings.Contains(err.Error(), EnvVar+`="`+c.v+`"`) {
				t.Errorf("parse(%q) = %+v, %v; want an error naming the spec", c.v, got, err)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("parse(%q) = %+v, %v; want %+v", c.v, got, err, c.want)
		}
	}
}

// TestUnknownRefused: a name no code hits is refused with the points
// that exist, so that a misspelt point is told apart at once.
func TestUnknownRefused(t *testing.T) {
	_, err := parse("checkpoint.complet")
	if err == nil || !strings.Contains(err.Error(), "no point has that name") ||
		!strings.Contains(err.Error(), "barrier.before, checkpoint.complete, ") {
		t.Errorf("parse of a misspelt point: %v; want it refused with the points listed", err)
	}
}
