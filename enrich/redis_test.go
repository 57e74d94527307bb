package enrich

import (
	"strings"
	"testing"

	"github.com/cepheus-cep/cepheus/event"
)

func TestParseRedisURL(t *testing.T) {
	for _, tc := range []struct {
		url  string
		want RedisConfig
		str  string // its String
	}{
		{"redis://localhost", RedisConfig{Addr: "localhost:6379"}, "redis://localhost:6379/0?format=hash"},
		{"redis://127.0.0.1:7000/", RedisConfig{Addr: "127.0.0.1:7000"}, "redis://127.0.0.1:7000/0?format=hash"},
		{"redis://cep:s3cret@cache.internal:6380/2?format=json&prefix=lk:cust:",
			RedisConfig{Addr: "cache.internal:6380", Username: "cep", Password: "s3cret", DB: 2, Format: "json", Prefix: "lk:cust:"},
			"redis://cep:***@cache.internal:6380/2?format=json&prefix=lk%3Acust%3A"},
		{"redis://:only-pass@h:1", RedisConfig{Addr: "h:1", Password: "only-pass"}, "redis://:***@h:1/0?format=hash"},
		{"redis://user@h:1?format=hash", RedisConfig{Addr: "h:1", Username: "user", Format: "hash"}, "redis://user@h:1/0?format=hash"},
		{"rediss://u:p%40ss@[::1]:6390/0", RedisConfig{Addr: "[::1]:6390", Username: "u", Password: "p@ss", TLS: true},
			"rediss://u:***@[::1]:6390/0?format=hash"},
		{"redis://h:1?ca=/etc/ca.pem", RedisConfig{Addr: "h:1", CAFile: "/etc/ca.pem"}, "rediss://h:1/0?ca=%2Fetc%2Fca.pem&format=hash"},
	} {
		got, err := ParseRedisURL(tc.url)
		if err != nil {
			t.Errorf("ParseRedisURL(%s): %v", tc.url, err)
			continue
		}
		if got != tc.want {
			t.Errorf("ParseRedisURL(%s)\n got  %+v\n want %+v", tc.url, got, tc.want)
		}
		if s := got.String(); s != tc.str {
			t.Errorf("String of %s = %s, want %s", tc.url, s, tc.str)
		}
		// String reads back as the configuration, but for the password.
		back, err := ParseRedisURL(got.String())
		if err != nil {
			t.Errorf("ParseRedisURL(%s): %v", got, err)
			continue
		}
		if got.Password != "" {
			got.Password = "***"
		}
		if got.CAFile != "" {
			got.TLS = true
		}
		if got.Format == "" {
			got.Format = "hash"
		}
		if back != got {
			t.Errorf("ParseRedisURL(String()) = %+v, want %+v", back, got)
		}
	}
}

func TestParseRedisURLErrors(t *testing.T) {
	for _, tc := range []struct{ url, want string }{
		{"http://h:1", `enrich: redis URL: scheme "http", want redis or rediss`},
		{"redis:///0", "enrich: redis URL redis:///0: no host"},
		{"redis://u:topsecret@h:1/x", `enrich: redis URL redis://u:***@h:1/x: database "x" is not a number >= 0`},
		{"redis://u:topsecret@h:1/-1", `enrich: redis URL redis://u:***@h:1/-1: database "-1" is not a number >= 0`},
		{"redis://h:1?format=xml", `enrich: redis URL redis://h:1?format=xml: format "xml", want hash or json`},
		{"redis://h:1?db=3", `enrich: redis URL redis://h:1?db=3: unknown parameter "db" (want format, prefix or ca)`},
		{"redis://h:1?format=json&format=hash", "enrich: redis URL redis://h:1?format=json&format=hash: parameter format given 2 times"},
		{"redis://u:topsecret@h:port", `enrich: redis URL: invalid port ":port" after host`},
	} {
		_, err := ParseRedisURL(tc.url)
		if err == nil || err.Error() != tc.want {
			t.Errorf("ParseRedisURL(%s):\n got  %v\n want %s", tc.url, err, tc.want)
		}
		if err != nil && strings.Contains(err.Error(), "topsecret") {
			t.Errorf("ParseRedisURL(%s): the error shows the password: %v", tc.url, err)
		}
	}
}

func TestOpenRedis(t *testing.T) {
	// OpenRedis does not connect: nothing listens on port 1.
	s, err := OpenRedis(customerSpec(), RedisConfig{Addr: "127.0.0.1:1", Username: "u", Password: "pw-123"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if got, want := s.String(), "redis://u:***@127.0.0.1:1/0?format=hash"; got != want {
		t.Errorf("String() = %s, want %s", got, want)
	}
	if s.prefix != "cepheus:lookup:customer:" {
		t.Errorf("default prefix %q", s.prefix)
	}

	for _, tc := range []struct {
		cfg  RedisConfig
		want string
	}{
		{RedisConfig{Addr: "localhost", Password: "pw-123"},
			`enrich: lookup customer: redis redis://:***@localhost/0?format=hash: address "localhost" is not host:port`},
		{RedisConfig{Addr: "h:1", Format: "xml", DB: -1, PoolSize: -2},
			"enrich: lookup customer: redis redis://h:1/-1?format=xml: format \"xml\", want hash or json\nnegative database -1\nnegative pool size -2"},
		{RedisConfig{Addr: "h:1", CAFile: "/nonexistent/ca.pem"},
			"enrich: lookup customer: redis rediss://h:1/0?ca=%2Fnonexistent%2Fca.pem&format=hash: open /nonexistent/ca.pem: no such file or directory"},
	} {
		_, err := OpenRedis(customerSpec(), tc.cfg)
		if err == nil || err.Error() != tc.want {
			t.Errorf("OpenRedis(%+v):\n got  %v\n want %s", tc.cfg, err, tc.want)
		}
	}
	ca := writeFile(t, "ca.pem", "not a certificate\n")
	if _, err := OpenRedis(customerSpec(), RedisConfig{Addr: "h:1", CAFile: ca}); err == nil || !strings.HasSuffix(err.Error(), ca+": no PEM certificate") {
		t.Errorf("OpenRedis with a CA file without certificates: %v", err)
	}
}

// TestHashValueErrors: a hash field that does not convert is told with
// every form its kind takes, so that the message says what to write.
func TestHashValueErrors(t *testing.T) {
	for _, tc := range []struct {
		f    Field
		s    string
		want string
	}{
		{Field{Kind: event.KindBool}, "yes", `want true, false, 1 or 0, got "yes"`},
		{Field{Kind: event.KindInt}, "3.0", `want an integer, got "3.0"`},
		{Field{Kind: event.KindFloat}, "abc", `want a number, got "abc"`},
		{Field{Kind: event.KindInt, Time: true}, "yesterday", `want an RFC 3339 time or epoch milliseconds, got "yesterday"`},
	} {
		if _, err := hashValue(tc.f, tc.s); err == nil || err.Error() != tc.want {
			t.Errorf("hashValue(%s, %q): %v, want %s", tc.f.Kind, tc.s, err, tc.want)
		}
	}
	for s, want := range map[string]bool{"true": true, "1": true, "false": false, "0": false} {
		if v, err := hashValue(Field{Kind: event.KindBool}, s); err != nil || !v.Equal(event.Bool(want)) {
			t.Errorf("hashValue(bool, %q) = %v, %v; want %v", s, v, err, want)
		}
	}
}
