package event

import (
	"fmt"
	"math/big"
	"math/rand/v2"
	"testing"
)

// TestWholeInt checks the whole-number rule on numbers written in many
// ways, and that text that is not a JSON number is refused.
func TestWholeInt(t *testing.T) {
	whole := map[string]int64{
		"3": 3, "-3": -3, "3.0": 3, "3e0": 3, "0.3e1": 3, "30e-1": 3, "3.000E+0": 3,
		"0": 0, "-0": 0, "0.0": 0, "0e99999": 0, "-0.0e-5": 0, "1.5e1": 15, "1E2": 100,
		"9223372036854775807": 1<<63 - 1, "-9223372036854775808": -1 << 63,
		"9.223372036854775807e18": 1<<63 - 1, "922337203685477580.7e1": 1<<63 - 1,
	}
	for text, want := range whole {
		if got, ok := WholeInt([]byte(text)); !ok || got != want {
			t.Errorf("WholeInt(%s) = %d, %v; want %d, true", text, got, ok, want)
		}
	}
	for _, text := range []string{
		"3.5", "1e19", "-1e19", "99999999999999999999", "9223372036854775808", "-9223372036854775809",
		"1e-1", "3.0000000000000000001", "1e1000000000",
		// not JSON numbers
		"", "-", "+3", "03", "-03", "3.", ".3", "3e", "3e+", "3ee1", "0x10", "3 ", " 3", "1_000", "Infinity", "NaN", "\"3\"",
	} {
		if got, ok := WholeInt([]byte(text)); ok {
			t.Errorf("WholeInt(%q) = %d, true; want false", text, got)
		}
	}
}

// TestWholeIntRandom compares WholeInt with exact rational arithmetic on
// random numbers around the edges: whole or not, in int64 range or not.
func TestWholeIntRandom(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	minInt, maxInt := big.NewRat(-1<<63, 1), new(big.Rat).SetInt(new(big.Int).SetUint64(1<<63-1))
	for range 20000 {
		digits := fmt.Sprint(rng.Uint64N(1 << 63))
		if rng.IntN(4) == 0 {
			digits += fmt.Sprint(rng.Uint64N(1000))
		}
		text := digits
		if cut := rng.IntN(len(digits) + 1); cut > 0 && cut < len(digits) && rng.IntN(2) == 0 {
			text = digits[:cut] + "." + digits[cut:]
		}
		if rng.IntN(2) == 0 {
			text += fmt.Sprintf("e%d", rng.IntN(41)-20)
		}
		if rng.IntN(2) == 0 {
			text = "-" + text
		}
		r, ok := new(big.Rat).SetString(text)
		if !ok {
			t.Fatalf("big.Rat cannot read %s", text)
		}
		want := r.IsInt() && r.Cmp(minInt) >= 0 && r.Cmp(maxInt) <= 0
		got, ok := WholeInt([]byte(text))
		if ok != want || ok && got != r.Num().Int64() {
			t.Errorf("WholeInt(%s) = %d, %v; want %v (%s)", text, got, ok, want, r.RatString())
		}
	}
}
