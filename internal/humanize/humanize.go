// Package humanize formats numbers for people: the summaries, progress
// lines and logs of the engine and the command share it.
package humanize

import "strconv"

// Int formats n with its thousands separated by commas: 1234567 is
// "1,234,567".
func Int(n int64) string {
	s := strconv.FormatInt(n, 10)
	sign := ""
	if n < 0 {
		sign, s = "-", s[1:]
	}
	b := make([]byte, 0, len(s)+len(s)/3)
	for i := range len(s) {
		if i > 0 && (len(s)-i)%3 == 0 {
			b = append(b, ',')
		}
		b = append(b, s[i])
	}
	return sign + string(b)
}
