package main

import "testing"

func TestByteSize(t *testing.T) {
	for _, c := range []struct {
		in   string
		want int64
		str  string
	}{
		{"384MiB", 384 << 20, "384MiB"}, {"2GiB", 2 << 30, "2GiB"}, {"1536KiB", 1536 << 10, "1536KiB"},
		{"500MB", 500e6, "500000000"}, {"0", 0, "0"}, {"1000", 1000, "1000"}, {"12 MiB", 12 << 20, "12MiB"}, {"7B", 7, "7"},
	} {
		var b byteSize
		if err := b.Set(c.in); err != nil || int64(b) != c.want || b.String() != c.str {
			t.Errorf("Set(%q): %d, %q, %v; want %d, %q", c.in, int64(b), b.String(), err, c.want, c.str)
		}
	}
	for _, bad := range []string{"", "-1MiB", "1.5GiB", "lots", "MiB", "9999999999GiB"} {
		var b byteSize
		if err := b.Set(bad); err == nil {
			t.Errorf("Set(%q) = %d, want an error", bad, int64(b))
		}
	}
}
