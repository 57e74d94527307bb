package main

import (
	"bytes"
	"context"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime/debug"
	"strings"
	"syscall"
	"testing"
	"unicode/utf8"
)

// cepheus runs the command line and returns its exit status and outputs.
func cepheus(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	err := run(context.Background(), args, &out, &errOut)
	code = exitCode(err, &errOut)
	return code, out.String(), errOut.String()
}

func writeFile(t *testing.T, dir, name, src string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

const goodSrc = `ruleset good
event time ts
rule r {
  key k
  pattern {
    begin a where name == "a"
    followedBy b where name == "b"
    within 1h
  }
}
test "finds a then b" {
  events {
    {"ts": 1, "k": "x", "name": "a"}
    {"ts": 2, "k": "x", "name": "b"}
  }
  expect {
    r key "x" { a: [1], b: [2] }
  }
}
`

const badSrc = `ruleset bad
event time ts
rule r {
  severity urgent
  pattern {
    begin a where name ==
  }
}
`

func TestCheck(t *testing.T) {
	dir := t.TempDir()
	good := writeFile(t, dir, "good.cep", goodSrc)
	code, out, errOut := cepheus(t, "check", good)
	if code != 0 || out != "" || errOut != "" {
		t.Errorf("check good: %d, %q, %q; want 0 and no output", code, out, errOut)
	}
	writeFile(t, dir, "bad.cep", badSrc)
	writeFile(t, dir, "notes.txt", "not a ruleset")
	// The diagnostics go to stderr; stdout stays empty.
	code, out, errOut = cepheus(t, "check", dir)
	if code != 1 || out != "" {
		t.Errorf("check dir: exit %d, stdout %q; want 1 and nothing on stdout", code, out)
	}
	bad := filepath.Join(dir, "bad.cep")
	for _, want := range []string{
		bad + ":4:12: unknown severity urgent",
		"      severity urgent\n               ^\n",
		bad + ":6:", // in the condition
	} {
		if !strings.Contains(errOut, want) {
			t.Errorf("check output does not contain %q:\n%s", want, errOut)
		}
	}
	_, out, errOut = cepheus(t, "check", "-q", bad)
	if out != "" || strings.Contains(errOut, "^") || strings.Count(errOut, "\n") != 2 {
		t.Errorf("check -q printed on stdout, or snippets, or not two lines:\n%s%s", out, errOut)
	}
	if code, _, errOut := cepheus(t, "check"); code != 2 || !strings.Contains(errOut, "no files given") {
		t.Errorf("check without files: %d, %q; want 2", code, errOut)
	}
	if code, _, errOut := cepheus(t, "check", filepath.Join(dir, "missing.cep")); code != 1 || !strings.Contains(errOut, "missing.cep") {
		t.Errorf("check of a missing file: %d, %q; want 1", code, errOut)
	}
	// - is standard input, named <stdin> in the errors, beside files.
	withStdin(t, badSrc, func() { code, out, errOut = cepheus(t, "check", good, "-") })
	if code != 1 || out != "" || !strings.Contains(errOut, "<stdin>:4:12: unknown severity urgent") || strings.Contains(errOut, good) {
		t.Errorf("check good.cep - (bad.cep on standard input): exit %d, stdout %q, stderr\n%s; want 1 and <stdin>'s errors alone", code, out, errOut)
	}
	withStdin(t, goodSrc, func() { code, out, errOut = cepheus(t, "check", "-") })
	if code != 0 || out != "" || errOut != "" {
		t.Errorf("check - (good.cep on standard input): %d, %q, %q; want 0 and no output", code, out, errOut)
	}
	withStdin(t, goodSrc, func() { code, _, errOut = cepheus(t, "check", "-", "-") })
	if code != 1 || !strings.Contains(errOut, "standard input given twice") {
		t.Errorf("check - -: %d, %q; want 1 and an error", code, errOut)
	}
}

// withStdin runs f with os.Stdin reading src.
func withStdin(t *testing.T, src string, f func()) {
	t.Helper()
	in, err := os.Open(writeFile(t, t.TempDir(), "stdin.txt", src))
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	saved := os.Stdin
	os.Stdin = in
	defer func() { os.Stdin = saved }()
	f()
}

// TestCheckWarnings: a file that compiles but reads a stage that always
// reads nothing passes check (exit 0) with a warning on stderr, the
// snippet left out by -q; backtest and test print it too.
func TestCheckWarnings(t *testing.T) {
	dir := t.TempDir()
	path := writeFile(t, dir, "warn.cep", `ruleset w
event time ts
rule own {
  key card
  pattern {
    begin a where a.amount > 10
    followedBy b where amount > 0
    within 1h
  }
  emit {
    amount: b.amount
  }
}
test "never matches" {
  events {
    {"ts": 1, "card": "k", "amount": 20}
    {"ts": 2, "card": "k", "amount": 5}
  }
  expect none
}
`)
	want := path + ":6:19: warning: stage a takes one event, and its condition tests the event before a takes it, so a.amount is always null here (the event under test's field is amount alone)\n"
	code, out, errOut := cepheus(t, "check", path)
	if code != 0 || out != "" || !strings.HasPrefix(errOut, want) || !strings.Contains(errOut, "    begin a where a.amount > 10\n") {
		t.Errorf("check: exit %d, stdout %q, stderr:\n%s\nwant 0, nothing on stdout, and on stderr:\n%s", code, out, errOut, want)
	}
	if code, _, errOut := cepheus(t, "check", "-q", path); code != 0 || errOut != want {
		t.Errorf("check -q: exit %d, stderr %q; want 0 and %q", code, errOut, want)
	}
	if code, _, errOut := cepheus(t, "check", "-q", "-strict", path); code != 1 || errOut != want {
		t.Errorf("check -q -strict: exit %d, stderr %q; want 1 and %q", code, errOut, want)
	}
	if code, _, errOut := cepheus(t, "check", "-strict", "../../rulesets"); code != 0 || errOut != "" {
		t.Errorf("check -strict of the bundled rulesets: exit %d, stderr %q; want 0 and nothing", code, errOut)
	}
	events := writeFile(t, dir, "events.jsonl", `{"ts": "2026-01-01T00:00:00Z", "card": "k", "amount": 20}`+"\n")
	if code, _, errOut := cepheus(t, "backtest", "-q", "-rules", path, "-events", events, "-alerts", filepath.Join(dir, "alerts.jsonl")); code != 0 || !strings.HasPrefix(errOut, want) {
		t.Errorf("backtest -q: exit %d, stderr:\n%s\nwant 0 and the warning", code, errOut)
	}
	if code, out, _ := cepheus(t, "test", path); code != 0 || !strings.HasPrefix(out, want) {
		t.Errorf("test: exit %d, stdout:\n%s\nwant 0 and the warning first", code, out)
	}
	code, _, errOut = cepheus(t, "run", "-q", "-rules", path, "-events", events, "-state", filepath.Join(dir, "state"), "-alerts", filepath.Join(dir, "alerts"))
	if want := "run: warning: " + path + ":6:19: stage a takes one event"; code != 0 || !strings.HasPrefix(errOut, want) {
		t.Errorf("run -q: exit %d, stderr:\n%s\nwant 0 and a line starting %q", code, errOut, want)
	}
}

func TestExamplesAreClean(t *testing.T) {
	// Clean: no errors and no warnings.
	if code, out, errOut := cepheus(t, "check", "../../rulesets"); code != 0 || errOut != "" {
		t.Errorf("check rulesets: exit %d\n%s%s", code, out, errOut)
	}
	if code, out, errOut := cepheus(t, "fmt", "-d", "../../rulesets"); code != 0 || out != "" {
		t.Errorf("fmt -d rulesets: exit %d\n%s%s", code, out, errOut)
	}
	if code, out, errOut := cepheus(t, "test", "../../rulesets"); code != 0 || !strings.HasPrefix(out, "ok\t") {
		t.Errorf("test rulesets: exit %d\n%s%s", code, out, errOut)
	}
}

func TestFmt(t *testing.T) {
	dir := t.TempDir()
	messy := "ruleset   m\n\n\n  event time ts # time\nrule r {\n pattern {\n begin a oneOrMore within 120s greedy\n }\n severity low\n}\n"
	want := "ruleset m\n\nevent time ts # time\nrule r {\n  severity low\n  pattern {\n    begin a oneOrMore within 2m greedy\n  }\n}\n"
	p := writeFile(t, dir, "m.cep", messy)
	code, out, _ := cepheus(t, "fmt", p)
	if code != 0 || out != want {
		t.Errorf("fmt: exit %d\n%s\nwant\n%s", code, out, want)
	}
	code, out, _ = cepheus(t, "fmt", "-d", p)
	if code != 1 || !strings.Contains(out, "--- "+p+"\n+++ "+p+" (formatted)\n") || !strings.Contains(out, "-  event time ts # time\n+event time ts # time\n") {
		t.Errorf("fmt -d: exit %d\n%s", code, out)
	}
	if b, _ := os.ReadFile(p); string(b) != messy {
		t.Errorf("fmt -d changed the file")
	}
	canonical := writeFile(t, dir, "c.cep", want)
	if code, out, _ := cepheus(t, "fmt", "-l", p, canonical); code != 0 || out != p+"\n" {
		t.Errorf("fmt -l: exit %d, output %q; want 0 and %q", code, out, p+"\n")
	}
	if code, out, _ := cepheus(t, "fmt", "-l", dir); code != 0 || out != p+"\n" {
		t.Errorf("fmt -l dir: exit %d, output %q; want 0 and %q", code, out, p+"\n")
	}
	if code, out, _ := cepheus(t, "fmt", "-l", "-d", p); code != 1 || !strings.HasPrefix(out, p+"\n--- "+p+"\n") {
		t.Errorf("fmt -l -d: exit %d, output %q", code, out)
	}
	if b, _ := os.ReadFile(p); string(b) != messy {
		t.Errorf("fmt -l changed the file")
	}
	if code, out, _ := cepheus(t, "fmt", "-w", p); code != 0 || out != "" {
		t.Errorf("fmt -w: exit %d, output %q", code, out)
	}
	if b, _ := os.ReadFile(p); string(b) != want {
		t.Errorf("fmt -w wrote\n%s\nwant\n%s", b, want)
	}
	if code, out, _ := cepheus(t, "fmt", "-d", p); code != 0 || out != "" {
		t.Errorf("fmt -d of a canonical file: exit %d, output %q", code, out)
	}
	if code, out, _ := cepheus(t, "fmt", "-l", p); code != 0 || out != "" {
		t.Errorf("fmt -l of a canonical file: exit %d, output %q", code, out)
	}
	// Standard input: -d exits 1 on a change, -l names it <stdin>.
	for _, c := range []struct {
		flag, src string
		code      int
		prefix    string
	}{
		{"-d", messy, 1, "--- <stdin>\n"},
		{"-d", want, 0, ""},
		{"-l", messy, 0, "<stdin>\n"},
	} {
		// With no file, or -, beside a file.
		for _, args := range [][]string{{c.flag}, {c.flag, "-", p}} {
			var code int
			var out string
			withStdin(t, c.src, func() { code, out, _ = cepheus(t, append([]string{"fmt"}, args...)...) })
			if code != c.code || !strings.HasPrefix(out, c.prefix) || c.prefix == "" && out != "" {
				t.Errorf("fmt %s of standard input: exit %d, output %q; want %d and %q...", strings.Join(args, " "), code, out, c.code, c.prefix)
			}
		}
	}
	if code, _, errOut := cepheus(t, "fmt", "-w", p, "-"); code != 2 || !strings.Contains(errOut, "cannot rewrite standard input") {
		t.Errorf("fmt -w FILE -: exit %d, %q; want 2", code, errOut)
	}
	bad := writeFile(t, dir, "bad.cep", "ruleset b\nrule r {\n  pattern {\n    begin (\n")
	code, out, errOut := cepheus(t, "fmt", bad)
	if code != 1 || out != "" || !strings.Contains(errOut, bad+":4:11: the group is not closed") {
		t.Errorf("fmt of a bad file: exit %d, stdout %q, stderr\n%s; want 1 and the error on stderr", code, out, errOut)
	}
	if code, _, _ := cepheus(t, "fmt", "-w"); code != 2 {
		t.Errorf("fmt -w without files: exit %d, want 2", code)
	}
}

// TestTestInterruptedInFile: a Ctrl-C while a file's tests run stops
// them before the next test (exit 130 through errInterrupted); it was
// seen only between files, so the last or only file ran on to its end
// and exited 0 or 1.
func TestTestInterruptedInFile(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var out strings.Builder
	ok, err := testFile(ctx, "../../rulesets/cards.cep", nil, false, &out)
	var ie *errInterrupted
	if ok || !errors.As(err, &ie) || ie.msg != "test interrupted in ../../rulesets/cards.cep after 0 tests" {
		t.Errorf("testFile with ctx cancelled: %v, %v; want interrupted after 0 tests", ok, err)
	}
	if strings.Contains(out.String(), "ok\t") {
		t.Errorf("an interrupted file reported as passed:\n%s", out.String())
	}
	ok, err = testFile(context.Background(), "../../rulesets/cards.cep", nil, false, &out)
	if !ok || err != nil {
		t.Errorf("testFile of cards.cep: %v, %v\n%s", ok, err, out.String())
	}
}

func TestTest(t *testing.T) {
	dir := t.TempDir()
	good := writeFile(t, dir, "good.cep", goodSrc)
	code, out, _ := cepheus(t, "test", "-v", good)
	if code != 0 || !strings.Contains(out, `--- PASS: `+good+`:11:1: "finds a then b"`) || !strings.Contains(out, "ok\t"+good+"\t1 test\n") {
		t.Errorf("test -v: exit %d\n%s", code, out)
	}
	failing := writeFile(t, dir, "failing.cep", strings.Replace(goodSrc, `r key "x"`, `r key "y"`, 1)+`test "other" {
  expect none
}
`)
	code, out, _ = cepheus(t, "test", failing)
	for _, want := range []string{
		`--- FAIL: ` + failing + `:11:1: "finds a then b"`,
		"    missing (expected, not produced):\n      r key \"y\" { a: [1], b: [2] }\n",
		"FAIL\t" + failing + "\t1 of 2 tests failed\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("test output does not contain %q:\n%s", want, out)
		}
	}
	if code != 1 {
		t.Errorf("test of a failing file: exit %d, want 1", code)
	}
	if code, out, _ := cepheus(t, "test", "-run", "^other$", failing); code != 0 || !strings.Contains(out, "ok\t"+failing+"\t1 test\n") {
		t.Errorf("test -run: exit %d\n%s", code, out)
	}
	if code, out, _ := cepheus(t, "test", "-run", "nothing", failing); code != 0 || !strings.Contains(out, "[no tests to run]") {
		t.Errorf("test -run with no test: exit %d\n%s", code, out)
	}
	bad := writeFile(t, dir, "bad.cep", badSrc)
	if code, out, _ := cepheus(t, "test", bad); code != 1 || !strings.Contains(out, "FAIL\t"+bad+"\t(does not compile)") {
		t.Errorf("test of a bad file: exit %d\n%s", code, out)
	}
	if code, _, _ := cepheus(t, "test", "-run", "(", good); code != 2 {
		t.Errorf("test -run with a bad regexp: exit %d, want 2", code)
	}
}

func TestHelpAndUsage(t *testing.T) {
	code, out, _ := cepheus(t, "help")
	if code != 0 || !strings.Contains(out, "cepheus check [-q] [-strict] files, directories or -...") {
		t.Errorf("help: exit %d\n%s", code, out)
	}
	// Each command's synopsis with a line saying what it does.
	for _, c := range commands() {
		if c.short == "" || !strings.Contains(out, "\t"+c.usage+"\n\t    "+c.short+"\n") {
			t.Errorf("help: the command %s without its line of what it does (%q)", c.name, c.short)
		}
	}
	// Help asked for goes to stdout, exit 0: help NAME and NAME -h print
	// the same, flags included.
	for _, c := range commands() {
		name := c.name
		code, out, errOut := cepheus(t, "help", name)
		if code != 0 || !strings.HasPrefix(out, "usage: cepheus "+name) || errOut != "" {
			t.Errorf("help %s: exit %d\n%s\nstderr %q", name, code, out, errOut)
		}
		code, out2, errOut := cepheus(t, name, "-h")
		if code != 0 || out2 != out || errOut != "" {
			t.Errorf("%s -h: exit %d, stdout\n%s\nstderr %q; want 0 and the output of help %s", name, code, out2, errOut, name)
		}
		if name != "version" && !strings.Contains(out, "\n\nFlags:\n") {
			t.Errorf("help %s lists no flags, or without a blank line before them:\n%s", name, out)
		}
	}
	// help of a subcommand: its command's help (which describes it), as
	// rules deploy -h prints; it was "help takes at most one command".
	for _, sub := range [][]string{{"rules", "deploy"}, {"enrich", "load"}} {
		_, want, _ := cepheus(t, sub[0], "-h")
		code, out, errOut := cepheus(t, append([]string{"help"}, sub...)...)
		if code != 0 || out != want || !strings.Contains(out, sub[1]) || errOut != "" {
			t.Errorf("help %s: exit %d, stdout\n%s\nstderr %q; want 0 and the output of %s -h", strings.Join(sub, " "), code, out, errOut, sub[0])
		}
	}
	// The subcommands help takes are those of the command's synopsis.
	for _, c := range commands() {
		for _, sub := range c.subs {
			if !regexp.MustCompile(`^cepheus ` + c.name + ` (\S+\|)?` + sub + `(\||\s)`).MatchString(c.usage) {
				t.Errorf("%s: subcommand %s not in its synopsis %q", c.name, sub, c.usage)
			}
		}
	}
	for _, args := range [][]string{nil, {"frobnicate"}, {"help", "frobnicate"}, {"help", "frobnicate", "x"},
		{"help", "rules", "nonsense"}, {"help", "run", "anything"}} {
		code, _, errOut := cepheus(t, args...)
		if code != 2 || !strings.Contains(errOut, "Run 'cepheus help' for usage.") {
			t.Errorf("%q: exit %d, stderr %q; want 2 and a pointer to help", args, code, errOut)
		}
	}
	// A bad command line of a command: the error once, and where its help is.
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"check", "-x", "f"}, "cepheus: check: flag provided but not defined: -x\nRun 'cepheus help check' for usage.\n"},
		{[]string{"version", "extra"}, "cepheus: version: takes no arguments\nRun 'cepheus help version' for usage.\n"},
		{[]string{"gen", "-days", "x"}, "cepheus: gen: invalid value \"x\" for flag -days: parse error (want a whole number)\nRun 'cepheus help gen' for usage.\n"},
		// A duration says what is wrong with it (the flag package: "parse
		// error" alone).
		{[]string{"backtest", "-out-of-orderness", "5sec"}, "cepheus: backtest: invalid value \"5sec\" for flag -out-of-orderness: parse error (want a duration such as 500ms, 10s or 5m: unknown unit \"sec\" in duration \"5sec\")\nRun 'cepheus help backtest' for usage.\n"},
		{[]string{"backtest", "-out-of-orderness", "3000000h"}, "cepheus: backtest: invalid value \"3000000h\" for flag -out-of-orderness: parse error (want a duration such as 500ms, 10s or 5m: \"3000000h\" is out of range (at most 2562047h, about 292 years))\nRun 'cepheus help backtest' for usage.\n"},
		{[]string{"run", "-poll", "1.2.3s"}, "cepheus: run: invalid value \"1.2.3s\" for flag -poll: parse error (want a duration such as 500ms, 10s or 5m: missing unit in duration \"1.2.3s\")\nRun 'cepheus help run' for usage.\n"},
	} {
		code, out, errOut := cepheus(t, c.args...)
		if code != 2 || out != "" || errOut != c.want {
			t.Errorf("%q: exit %d, stdout %q, stderr %q; want 2 and %q", c.args, code, out, errOut, c.want)
		}
	}
	code, out, _ = cepheus(t, "version")
	if code != 0 || !strings.HasPrefix(out, "cepheus ") {
		t.Errorf("version: exit %d, %q", code, out)
	}
	for _, flag := range []string{"-version", "--version"} {
		code, out2, errOut := cepheus(t, flag)
		if code != 0 || out2 != out || errOut != "" {
			t.Errorf("%s: exit %d, %q, stderr %q; want 0 and %q", flag, code, out2, errOut, out)
		}
	}
	for _, h := range []string{"-h", "-help", "--help", "help"} {
		code, out, errOut := cepheus(t, "help", h)
		if code != 0 || !strings.Contains(out, "cepheus check [-q] [-strict] files, directories or -...") || errOut != "" {
			t.Errorf("help %s: exit %d\n%s%s", h, code, out, errOut)
		}
	}
	if code := exitCode(errors.New("boom"), &bytes.Buffer{}); code != 1 {
		t.Errorf("exitCode(other error) = %d, want 1", code)
	}
}

// TestHelpTexts checks the help of every command against its flags: the
// synopsis spells flags as they are defined (-rules, not --rules), and no
// flag states its default twice.
func TestHelpTexts(t *testing.T) {
	flagRx := regexp.MustCompile(`(^|[\s\[])(-+)([a-z][a-z-]*)`)
	for _, c := range commands() {
		_, help, _ := cepheus(t, "help", c.name)
		for _, m := range flagRx.FindAllStringSubmatch(c.usage, -1) {
			if m[2] != "-" {
				t.Errorf("%s: synopsis %q spells flag %s%s; the flags take one dash", c.name, c.usage, m[2], m[3])
			}
			if !regexp.MustCompile(`\n  -` + m[3] + `[ \t\n]`).MatchString(help) {
				t.Errorf("%s: synopsis %q names -%s, which is not among its flags", c.name, c.usage, m[3])
			}
		}
		if regexp.MustCompile(`\(default: [^\n]*\) \(default `).MatchString(help) {
			t.Errorf("help %s states a default twice:\n%s", c.name, help)
		}
	}
}

// TestFlagsAfterFiles: flags may follow the files; "--" ends the flags.
func TestFlagsAfterFiles(t *testing.T) {
	dir := t.TempDir()
	bad := writeFile(t, dir, "bad.cep", badSrc)
	_, _, want := cepheus(t, "check", "-q", bad)
	if code, _, errOut := cepheus(t, "check", bad, "-q"); code != 1 || errOut != want {
		t.Errorf("check FILE -q: exit %d, stderr\n%s\nwant 1 and\n%s", code, errOut, want)
	}
	good := writeFile(t, dir, "good.cep", goodSrc)
	if code, out, _ := cepheus(t, "test", good, "-v"); code != 0 || !strings.Contains(out, "--- PASS") {
		t.Errorf("test FILE -v: exit %d\n%s", code, out)
	}
	if code, _, errOut := cepheus(t, "check", "--", "-q"); code != 1 || errOut != "cepheus: -q: no such file or directory\n" {
		t.Errorf("check -- -q: exit %d, stderr %q; want -q taken as a file", code, errOut)
	}
}

// TestRulesArgOfSeveral: rules validate and deploy of a directory holding
// several rulesets name the directory; run and serve, given it as -rules,
// fail as on another bad command line (exit 2 and where their help is;
// they exited 1, the docs trial).
func TestRulesArgOfSeveral(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "a.cep", goodSrc)
	writeFile(t, dir, "b.cep", goodSrc)
	for _, sub := range []string{"validate", "deploy"} {
		want := "cepheus: rules: " + dir + " holds 2 rulesets; name the file\n"
		if code, _, errOut := cepheus(t, "rules", sub, "-server", "127.0.0.1:1", dir); code != 2 || !strings.HasPrefix(errOut, want) {
			t.Errorf("rules %s DIR: exit %d, stderr %q; want 2 and %q", sub, code, errOut, want)
		}
	}
	events := writeFile(t, t.TempDir(), "e.jsonl", abEvents(4, 0, ""))
	for _, cmd := range []string{"run", "serve"} {
		out := t.TempDir()
		args := []string{cmd, "-rules", dir, "-events", events, "-state", filepath.Join(out, "state"), "-alerts", filepath.Join(out, "alerts")}
		if cmd == "serve" {
			args = append(args, "-grpc", "127.0.0.1:0", "-http", "127.0.0.1:0")
		}
		want := "cepheus: " + cmd + ": " + dir + " holds 2 rulesets; a run takes one (name the file)\nRun 'cepheus help " + cmd + "' for usage.\n"
		if code, _, errOut := cepheus(t, args...); code != 2 || errOut != want {
			t.Errorf("%s -rules DIR: exit %d, stderr %q; want 2 and %q", cmd, code, errOut, want)
		}
	}
}

// TestRulesFlagsTogether: the flags of rules that do not go together are
// usage errors (exit 2) before any server is asked.
func TestRulesFlagsTogether(t *testing.T) {
	file := writeFile(t, t.TempDir(), "a.cep", goodSrc)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"deploy", "-shadow", "-drop-changed"}, "-drop-changed goes with a deploy of the active version, not with -shadow"},
		{[]string{"validate", "-drop-changed"}, "-drop-changed goes with deploy, rollback and promote"},
		{[]string{"rollback", "-shadow"}, "-shadow goes with deploy"},
		{[]string{"validate", "-from", "abcdef"}, "-from goes with deploy, rollback and promote"},
	} {
		args := append(append([]string{"rules"}, c.args...), "-server", "127.0.0.1:1")
		if c.args[0] != "rollback" {
			args = append(args, file)
		}
		if code, _, errOut := cepheus(t, args...); code != 2 || !strings.Contains(errOut, c.want) {
			t.Errorf("%v: exit %d, stderr %q; want 2 and %q", c.args, code, errOut, c.want)
		}
	}
}

// TestSubcommandAfterFlags: rules and enrich take their subcommand after
// their flags too (cepheus rules -server ADDR list), as their other
// arguments; it was refused as no subcommand at all.
func TestSubcommandAfterFlags(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	for _, args := range [][]string{{"-server", addr, "list"}, {"-server", addr, "-drop-changed", "rollback"}} {
		code, _, errOut := cepheus(t, append([]string{"rules"}, args...)...)
		if code != 1 || !strings.Contains(errOut, addr+": no cepheus serve answers there") {
			t.Errorf("rules %s: exit %d, stderr %q; want 1 saying that no server answers there", strings.Join(args, " "), code, errOut)
		}
	}
	if code, _, errOut := cepheus(t, "rules", "-server", addr, "-drop-changed", "list"); code != 2 || !strings.Contains(errOut, "-drop-changed goes with deploy, rollback and promote") {
		t.Errorf("rules -drop-changed list: exit %d, stderr %q; want 2 and the flag refused", code, errOut)
	}
	if code, _, errOut := cepheus(t, "enrich", "-lookup", "customer", "load"); code != 2 || !strings.Contains(errOut, "-redis") || strings.Contains(errOut, "want a subcommand") {
		t.Errorf("enrich -lookup customer load: exit %d, stderr %q; want 2 and the missing flags", code, errOut)
	}
	if code, _, errOut := cepheus(t, "rules", "-server", addr); code != 2 || !strings.Contains(errOut, "want a subcommand") {
		t.Errorf("rules -server ADDR: exit %d, stderr %q; want 2 and a subcommand asked for", code, errOut)
	}
}

// TestMisspeltFlag: a flag a command lacks is refused (exit 2); when it is
// a slip of one the command has, the message names that one.
func TestMisspeltFlag(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"run", "-event", "e.jsonl"}, "run: flag provided but not defined: -event (did you mean -events?)\n"},
		{[]string{"run", "-rule", "r.cep"}, "run: flag provided but not defined: -rule (did you mean -rules?)\n"},
		{[]string{"backtest", "-lookups", "x"}, "backtest: flag provided but not defined: -lookups (did you mean -lookup?)\n"},
		{[]string{"gen", "-Days", "3"}, "gen: flag provided but not defined: -Days (did you mean -days?)\n"},
		{[]string{"backtest", "-rulse", "r.cep"}, "backtest: flag provided but not defined: -rulse (did you mean -rules?)\n"},  // not -rule, as near
		{[]string{"backtest", "-evts", "e.jsonl"}, "backtest: flag provided but not defined: -evts (did you mean -events?)\n"}, // a short form, as the rule language's names
		{[]string{"run", "-nope"}, "run: flag provided but not defined: -nope\n"},
		{[]string{"run", "-grpc", "x"}, "run: flag provided but not defined: -grpc\n"},
	} {
		code, _, errOut := cepheus(t, c.args...)
		if code != 2 || !strings.Contains(errOut, c.want) {
			t.Errorf("%v: exit %d, stderr %q; want 2 and %q", c.args, code, errOut, c.want)
		}
	}
}

// TestUnknownSubcommand: a misspelt subcommand of rules or enrich is named
// as unknown, with the ones there are; it was answered as if none had been
// given ("want a subcommand").
func TestUnknownSubcommand(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"rules", "deplyo", "f.cep"}, `rules: unknown subcommand "deplyo": want validate, deploy, list, rollback or promote`},
		{[]string{"rules", "-server", "127.0.0.1:1", "lsit"}, `rules: unknown subcommand "lsit": want validate`},
		{[]string{"enrich", "lod", "-redis", "127.0.0.1:1"}, `enrich: unknown subcommand "lod": want load`},
		{[]string{"enrich"}, "enrich: want a subcommand: load"},
	} {
		code, _, errOut := cepheus(t, c.args...)
		if code != 2 || !strings.Contains(errOut, c.want) {
			t.Errorf("%v: exit %d, stderr %q; want 2 and %q", c.args, code, errOut, c.want)
		}
	}
}

// TestControlUnreachable: status and rules at an address where no
// cepheus serve listens say so, without gRPC's wrapping.
func TestControlUnreachable(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	for _, args := range [][]string{{"status"}, {"rules", "list"}, {"rules", "rollback"}} {
		code, _, errOut := cepheus(t, append(args, "-server", addr)...)
		if code != 1 || !strings.Contains(errOut, addr+": no cepheus serve answers there (dial tcp "+addr+": connect: connection refused): start it, or give its -grpc address with -server\n") ||
			strings.Contains(errOut, "rpc error") {
			t.Errorf("%s -server %s: exit %d, stderr %q; want 1 saying that no server answers there", strings.Join(args, " "), addr, code, errOut)
		}
	}
}

func TestVersionString(t *testing.T) {
	info := func(v string, settings ...debug.BuildSetting) *debug.BuildInfo {
		return &debug.BuildInfo{Main: debug.Module{Path: "github.com/cepheus-cep/cepheus", Version: v}, Settings: settings}
	}
	rev := debug.BuildSetting{Key: "vcs.revision", Value: "abc123"}
	dirty := debug.BuildSetting{Key: "vcs.modified", Value: "true"}
	for _, c := range []struct {
		stamped string
		info    *debug.BuildInfo
		want    string
	}{
		{"", nil, "(devel)"},
		{"v1.2.3-stamped", nil, "v1.2.3-stamped"},
		{"", info("(devel)"), "(devel)"},
		{"e464821-dirty", info("(devel)"), "e464821-dirty"},
		{"e464821", info(""), "e464821"},
		{"e464821", info("v0.3.0"), "v0.3.0"},
		{"", info("(devel)", rev, dirty), "(devel) abc123+dirty"},
		{"", info("v0.0.0-20261201-abc123", rev), "v0.0.0-20261201-abc123 abc123"},
	} {
		if got := versionString(c.stamped, c.info); got != c.want {
			t.Errorf("versionString(%q, %v) = %q, want %q", c.stamped, c.info != nil, got, c.want)
		}
	}
}

// TestVersionStamped builds the binary as make build does, without VCS
// information: version prints the stamped version, not (devel).
func TestVersionStamped(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	bin := filepath.Join(t.TempDir(), "cepheus")
	build := exec.Command("go", "build", "-buildvcs=false", "-ldflags", "-X main.version=v9.8.7-test", "-o", bin, ".")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	out, err := exec.Command(bin, "version").Output()
	if err != nil || string(out) != "cepheus v9.8.7-test\n" {
		t.Errorf("version of a stamped build: %v, %q; want %q", err, out, "cepheus v9.8.7-test\n")
	}
}

func TestUnifiedDiff(t *testing.T) {
	a := "1\n2\n3\n4\n5\n6\n7\n8\n9\n10\n11\n12\n"
	b := "1\n2\nthree\n4\n5\n6\n7\n8\n9\n10\n11\n12\n13\n"
	want := `--- f
+++ f (formatted)
@@ -1,6 +1,6 @@
 1
 2
-3
+three
 4
 5
 6
@@ -10,3 +10,4 @@
 10
 11
 12
+13
`
	if got := unifiedDiff("f", a, b); got != want {
		t.Errorf("unifiedDiff =\n%s\nwant\n%s", got, want)
	}
	if got := unifiedDiff("f", a, a); got != "" {
		t.Errorf("unifiedDiff of equal texts = %q", got)
	}
	if got := unifiedDiff("f", "a", "b\n"); got != "--- f\n+++ f (formatted)\n@@ -1 +1 @@\n-a\n\\ No newline at end of file\n+b\n" {
		t.Errorf("unifiedDiff without final newline =\n%s", got)
	}
}

// TestRunHelpKafka: the flags of run that apply to an unbounded
// -input-topic as well as to -follow say so, and -alerts is not required
// when the alerts go to -alerts-topic.
func TestRunHelpKafka(t *testing.T) {
	_, help, _ := cepheus(t, "help", "run")
	for _, name := range []string{"idle-timeout", "wall-clock-advance"} {
		m := regexp.MustCompile(`\n  -` + name + `[^\n]*\n\s+([^\n]*)`).FindStringSubmatch(help)
		if m == nil || !strings.Contains(m[1], "-input-topic") {
			t.Errorf("run -h: -%s does not say that it applies to an unbounded -input-topic: %q", name, m)
		}
	}
	m := regexp.MustCompile(`\n  -alerts string\n\s+([^\n]*)`).FindStringSubmatch(help)
	if m == nil || strings.HasSuffix(m[1], "(required)") {
		t.Errorf("run -h: -alerts says it is required, which it is not with -alerts-topic: %q", m)
	}
}

// TestRunRequiredFlags: a command line that lacks a required flag, or
// gives two that exclude each other, is a usage error that names them.
func TestRunRequiredFlags(t *testing.T) {
	const need = "-events or -input-topic (one of them), -state and -alerts or -alerts-topic (one of them) are required"
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"run", "-rules", "r.cep", "-events", "e.jsonl", "-state", "s"},
			"cepheus: run: -rules, " + need + "; missing: -alerts or -alerts-topic\n"},
		{[]string{"run"},
			"cepheus: run: -rules, " + need + "; missing: -rules, -events or -input-topic, -state, -alerts or -alerts-topic\n"},
		{[]string{"serve", "-events", "e.jsonl", "-input-topic", "t", "-alerts", "a"},
			"cepheus: serve: -rules or -rules-dir (one of them), " + need + "; missing: -rules or -rules-dir, -state; given together: -events and -input-topic\n"},
	} {
		code, out, errOut := cepheus(t, c.args...)
		if code != 2 || out != "" || !strings.HasPrefix(errOut, c.want) {
			t.Errorf("cepheus %s: exit %d, stderr\n%s\nwant exit 2 and\n%s", strings.Join(c.args, " "), code, errOut, c.want)
		}
	}
}

// TestRunWallClockNeeds: -wall-clock-advance without an unbounded input
// names both inputs it works with.
func TestRunWallClockNeeds(t *testing.T) {
	dir := t.TempDir()
	rules := writeFile(t, dir, "good.cep", goodSrc)
	for _, args := range [][]string{
		{"-events", filepath.Join(dir, "e.jsonl"), "-alerts", filepath.Join(dir, "a")},
		{"-input-topic", "t", "-bounded", "-brokers", "127.0.0.1:1", "-alerts", filepath.Join(dir, "a")},
	} {
		args = append([]string{"run", "-rules", rules, "-state", filepath.Join(dir, "s"), "-wall-clock-advance"}, args...)
		code, _, errOut := cepheus(t, args...)
		if code != 2 || !strings.Contains(errOut, "-wall-clock-advance needs -follow or an unbounded -input-topic") {
			t.Errorf("%s: exit %d, stderr %q; want 2 naming -follow and an unbounded -input-topic", strings.Join(args, " "), code, errOut)
		}
	}
}

// TestRunBoundedNeedsTopic: -bounded without -input-topic is a usage
// error, not a flag silently ignored.
func TestRunBoundedNeedsTopic(t *testing.T) {
	dir := t.TempDir()
	rules := writeFile(t, dir, "good.cep", goodSrc)
	events := writeFile(t, dir, "e.jsonl", abEvents(4, 0, ""))
	code, _, errOut := cepheus(t, "run", "-rules", rules, "-events", events, "-state", filepath.Join(dir, "s"), "-alerts", filepath.Join(dir, "a"), "-bounded")
	if code != 2 || !strings.Contains(errOut, "-bounded goes with -input-topic") {
		t.Errorf("run -events -bounded: exit %d, stderr %q; want 2 naming -input-topic", code, errOut)
	}
	if _, err := os.Stat(filepath.Join(dir, "s")); !os.IsNotExist(err) {
		t.Errorf("the state directory was made: %v", err)
	}
}

// TestTestHelp: the help of test says all that an expected match compares
// (emit values too) and what a failure prints.
func TestTestHelp(t *testing.T) {
	_, help, _ := cepheus(t, "help", "test")
	help = strings.Join(strings.Fields(help), " ")
	for _, want := range []string{"(rule, key, events of each stage, and the emit values", "failed at run time"} {
		if !strings.Contains(help, want) {
			t.Errorf("help test lacks %q:\n%s", want, help)
		}
	}
}

// TestHelpProseWrapped: the prose of every command's help (not its usage
// line, its indented examples or its flags) is wrapped, no line over 100
// characters.
func TestHelpProseWrapped(t *testing.T) {
	for _, c := range commands() {
		_, help, _ := cepheus(t, "help", c.name)
		help, _, _ = strings.Cut(help, "\nFlags:\n")
		for line := range strings.Lines(help) {
			line = strings.TrimRight(line, "\n")
			if strings.HasPrefix(line, "usage: ") || strings.HasPrefix(line, " ") || strings.HasPrefix(line, "\t") {
				continue
			}
			if n := utf8.RuneCountInString(line); n > 100 {
				t.Errorf("help %s: a line of %d characters:\n%s", c.name, n, line)
			}
		}
	}
}

// failingWriter is an output that refuses every write, empty ones included
// (a pipe whose reader is gone, /dev/full).
type failingWriter struct{ err error }

func (w failingWriter) Write([]byte) (int, error) { return 0, w.err }

// TestHelpWriteError: help that cannot be written (cepheus help > FILE on
// a full disk) exits 1 with the write's error, as version does; it exited
// 0, the help lost or torn.
func TestHelpWriteError(t *testing.T) {
	full := failingWriter{&os.PathError{Op: "write", Path: "/dev/stdout", Err: syscall.ENOSPC}}
	for _, args := range [][]string{{"help"}, {"-h"}, {"help", "help"}, {"help", "backtest"}, {"backtest", "-h"}, {"rules", "-h"}, {"help", "rules", "deploy"}, {"version"}} {
		var stderr bytes.Buffer
		err := run(context.Background(), args, full, &stderr)
		if code := exitCode(err, &stderr); code != 1 || stderr.String() != "cepheus: write /dev/stdout: no space left on device\n" {
			t.Errorf("%q with stdout full: exit %d, stderr %q; want 1 and the write error", args, code, stderr.String())
		}
	}
}

// TestUnknownCommand: a command that does not exist is a usage error; a
// slip of a real one's name says which was meant, in help too.
func TestUnknownCommand(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"chek", "x.cep"}, `unknown command "chek" (did you mean check?)`},
		{[]string{"help", "backtst"}, `unknown command "backtst" (did you mean backtest?)`},
		{[]string{"zzz"}, `unknown command "zzz"` + "\n"},
	} {
		code, _, errOut := cepheus(t, c.args...)
		if code != 2 || !strings.Contains(errOut, c.want) {
			t.Errorf("%v: exit %d, want 2 and %q:\n%s", c.args, code, c.want, errOut)
		}
	}
}

// TestDocsExample: the complete ruleset of docs/rules.md ("A first
// ruleset", the block starting "# Comments run") compiles without errors
// or warnings and is in canonical form, so that the reference's first
// example is one a reader can copy.
func TestDocsExample(t *testing.T) {
	doc, err := os.ReadFile("../../docs/rules.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(doc), "```\n# Comments run")
	block, _, closed := strings.Cut(rest, "\n```\n")
	if !ok || !closed {
		t.Fatal("docs/rules.md has no code block starting \"# Comments run\"")
	}
	path := writeFile(t, t.TempDir(), "example.cep", "# Comments run"+block+"\n")
	if code, out, errOut := cepheus(t, "check", path); code != 0 || out != "" || errOut != "" {
		t.Errorf("check of docs/rules.md's example: exit %d\n%s%s", code, out, errOut)
	}
	if code, out, errOut := cepheus(t, "fmt", "-d", path); code != 0 || out != "" {
		t.Errorf("fmt -d of docs/rules.md's example: exit %d\n%s%s", code, out, errOut)
	}
}

// TestProblemsError: cepheus rules validate and deploy count a refused
// file's problems in words that agree with the number.
func TestProblemsError(t *testing.T) {
	for n, want := range map[int]string{1: "bad.cep: 1 problem", 2: "bad.cep: 2 problems"} {
		if got := problemsError("bad.cep", n).Error(); got != want {
			t.Errorf("problemsError(%d) = %q, want %q", n, got, want)
		}
	}
}

// TestInterruptedExitStatus: consume, produce, test, enrich load, gen and
// backtest stopped by Ctrl-C (their context cancelled) exit 130, saying
// what they were doing, and by SIGTERM 143: 128 plus the signal's number,
// as a shell reports a process the signal killed, and as cepheus -h says.
// consume, produce, test and enrich exited 1 with "context canceled" or
// their own message, as for an error; all of them exited 130 after
// SIGTERM too, which told a script a Ctrl-C.
func TestInterruptedExitStatus(t *testing.T) {
	dir := t.TempDir()
	rulesFile := writeFile(t, dir, "good.cep", goodSrc)
	records := writeFile(t, dir, "customer.jsonl", `{"customer_id": "c1", "home_country": "FR"}`+"\n")
	events := writeFile(t, dir, "events.jsonl", `{"ts": 1, "k": "x", "name": "a"}`+"\n")
	// A port no broker or server listens on: the cancelled context ends
	// each command before it would give up on it.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	nobody := ln.Addr().String()
	ln.Close()
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"consume", "-brokers", nobody, "-topic", "t"}, "cepheus: consume interrupted: 0 records read from t\n"},
		{[]string{"produce", "-brokers", nobody, "-topic", "t", "-events", events}, "cepheus: produce interrupted: 0 records written to t\n"},
		{[]string{"test", rulesFile}, "cepheus: test interrupted before " + rulesFile + "\n"},
		{[]string{"enrich", "load", "-redis", nobody, "-rules", "../../rulesets/cards.cep", "-lookup", "customer", "-file", records},
			"cepheus: enrich interrupted: lookup customer may be partly written (load it again)\n"},
		{[]string{"gen", "-history-days", "0", "-events-per-day", "100", "-scenarios", "card_testing"}, "cepheus: gen interrupted: the output is partial\n"},
		{[]string{"backtest", "-q", "-rules", rulesFile, "-events", events}, "cepheus: backtest interrupted before its first line\n"},
		{[]string{"backtest", "-rules", rulesFile, "-events", events}, "\ncepheus: backtest interrupted before its first line; the summary above is partial\n"},
	} {
		for _, s := range []struct {
			cause error
			code  int
		}{{nil, 130}, {stopSignal{syscall.SIGINT}, 130}, {stopSignal{syscall.SIGTERM}, 143}} {
			ctx, cancel := context.WithCancelCause(context.Background())
			cancel(s.cause)
			var stdout, stderr bytes.Buffer
			err := run(ctx, c.args, &stdout, &stderr)
			if code := exitCode(err, &stderr); code != s.code || !strings.HasSuffix(stderr.String(), c.want) {
				t.Errorf("%s with its context cancelled by %v: exit %d, want %d and stderr ending %q:\n%s", c.args[0], s.cause, code, s.code, c.want, stderr.String())
			}
		}
	}
}

// TestTestPassWithConditionErrors: a test that passes while a condition
// failed on its events (an expect none over an amount sent as a string)
// says so, with the errors, even without -v; the file's tests still pass.
func TestTestPassWithConditionErrors(t *testing.T) {
	file := writeFile(t, t.TempDir(), "e.cep", `ruleset e
event time ts
rule big {
  key card
  pattern {
    begin a where amount > 100
  }
}
test "a string amount" {
  events {
    {"ts": 1, "card": "c1", "amount": "150.00"}
  }
  expect none
}
test "a number" {
  events {
    {"ts": 1, "card": "c1", "amount": 50}
  }
  expect none
}
`)
	code, out, errOut := cepheus(t, "test", file)
	want := "--- PASS: " + file + ":9:1: \"a string amount\", with condition errors (each counted as false):\n    rule big: 1, the last: cannot compare string with int\nok\t" + file + "\t2 tests\n"
	if code != 0 || out != want {
		t.Errorf("exit %d, stdout\n%s\nwant\n%s\nstderr %s", code, out, want, errOut)
	}
}
