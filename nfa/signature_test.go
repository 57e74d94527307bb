package nfa

import (
	"testing"
	"time"

	"github.com/cepheus-cep/cepheus/event"
)

type signed string

func (s signed) Eval(ev *event.Event, _ *Context) bool {
	n, _ := ev.Field(0).AsString()
	return n == string(s)
}

func (s signed) Signature() string { return string(s) }

func TestStartSignature(t *testing.T) {
	sig := func(p *Pattern) (string, bool) {
		t.Helper()
		n, err := Compile(p)
		if err != nil {
			t.Fatal(err)
		}
		return n.StartSignature()
	}
	a, ok := sig(Begin("a").Where(signed("x")).FollowedBy("b").Where(signed("y")).Within(time.Minute))
	if !ok {
		t.Fatal("a: no signature")
	}
	// Another continuation and window: the same start.
	b, ok := sig(Begin("a").Where(signed("x")).Next("c").Where(signed("z")).Next("d"))
	if !ok || a != b {
		t.Errorf("same start: %q (%v) and %q", b, ok, a)
	}
	// A looping start takes the same events (where the take leads is not
	// part of the signature: Inert does not depend on it).
	if c, ok := sig(Begin("a").Where(signed("x")).OneOrMore().FollowedBy("b").Where(signed("y"))); !ok || c != a {
		t.Errorf("looping start: %q (%v), want %q", c, ok, a)
	}
	// Another start condition, an optional start (whose closure reaches
	// the next stage): other signatures.
	for _, p := range []*Pattern{
		Begin("a").Where(signed("w")).FollowedBy("b").Where(signed("y")),
		Begin("a").Where(signed("x")).Optional().FollowedBy("b").Where(signed("y")),
	} {
		if c, ok := sig(p); ok && c == a {
			t.Errorf("%q: the signature of another start", c)
		}
	}
	// A condition without a signature: none.
	if c, ok := sig(Begin("a").Where(nameIs("x")).FollowedBy("b")); ok {
		t.Errorf("CondFunc start: signature %q", c)
	}
}
