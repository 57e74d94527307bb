package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/cepheus-cep/cepheus/internal/failpoint"
	"github.com/cepheus-cep/cepheus/rules"
)

// The sources of a setting of cepheus serve, in precedence order.
const (
	fromFlag    = "flag"
	fromEnv     = "environment"
	fromFile    = "config file"
	fromDefault = "default"
)

// envName is the environment variable of a flag: CEPHEUS_ and its name in
// capitals, - as _ (-checkpoint-interval: CEPHEUS_CHECKPOINT_INTERVAL).
func envName(flagName string) string {
	return "CEPHEUS_" + strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}

// ownEnv are the flags with an environment variable of their own, shared
// with the commands that have no config file (produce, consume, backtest),
// which is read besides envName.
var ownEnv = map[string]string{
	"brokers": brokersEnv, "kafka-config": kafkaConfigEnv, "tls-ca": tlsCAEnv,
	"sasl": saslMechanismEnv, "sasl-user": saslUserEnv, "redis-user": redisUserEnv,
}

// applyConfig sets every flag of fs the command line did not set from the
// environment (envName, then ownEnv), else from the YAML file path
// (top-level keys named as the flags; "" for none), and returns where
// each flag's value came from. A flag set so counts as set (fs.Visit
// visits it), as one of the command line does. A key no flag has, or a
// value a flag refuses, is an error naming the file and line.
func applyConfig(fs *flag.FlagSet, path string, getenv func(string) string, skip ...string) (map[string]string, error) {
	src := map[string]string{}
	fs.Visit(func(f *flag.Flag) { src[f.Name] = fromFlag })
	file := map[string]*yaml.Node{}
	if path != "" {
		b, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("config: %w", err)
		}
		var doc yaml.Node
		if err := yaml.Unmarshal(b, &doc); err != nil {
			return nil, fmt.Errorf("config %s: %w", path, err)
		}
		if len(doc.Content) > 0 {
			m := doc.Content[0]
			if m.Kind != yaml.MappingNode {
				return nil, fmt.Errorf("config %s:%d: want a mapping of settings (name: value)", path, m.Line)
			}
			keys := map[string]*yaml.Node{}
			for i := 0; i+1 < len(m.Content); i += 2 {
				k, v := m.Content[i], m.Content[i+1]
				if first, ok := keys[k.Value]; ok {
					// YAML's last would win, without a word.
					return nil, fmt.Errorf("config %s:%d:%d: setting %q given twice (first at line %d)", path, k.Line, k.Column, k.Value, first.Line)
				}
				keys[k.Value] = k
				if fs.Lookup(k.Value) == nil || slices.Contains(skip, k.Value) {
					hint := closestFlag(fs, k.Value, "", skip...)
					if hint == "" {
						hint = " (the settings are the flags of cepheus serve, without the dash)"
					}
					return nil, fmt.Errorf("config %s:%d:%d: unknown setting %q%s", path, k.Line, k.Column, k.Value, hint)
				}
				if v.Kind == yaml.SequenceNode && listSettings[k.Value] {
					// lookup: [customer=..., merchant=...]: the flag's
					// comma-separated list (it was refused as no single
					// value, with no word of the commas).
					var items []string
					for _, it := range v.Content {
						if it.Kind != yaml.ScalarNode || strings.Contains(it.Value, ",") {
							return nil, fmt.Errorf("config %s:%d:%d: setting %q: want a list of single values without commas", path, it.Line, it.Column, k.Value)
						}
						items = append(items, it.Value)
					}
					v = &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: strings.Join(items, ","), Line: v.Line, Column: v.Column}
				}
				if v.Kind != yaml.ScalarNode {
					return nil, fmt.Errorf("config %s:%d:%d: setting %q: want a single value", path, v.Line, v.Column, k.Value)
				}
				file[k.Value] = v
			}
		}
	}
	var err error
	fs.VisitAll(func(f *flag.Flag) {
		if err != nil || src[f.Name] != "" || slices.Contains(skip, f.Name) {
			return
		}
		for _, name := range []string{envName(f.Name), ownEnv[f.Name]} {
			if v := getenv(name); name != "" && v != "" {
				if serr := fs.Set(f.Name, v); serr != nil {
					err = fmt.Errorf("%s=%q: %v%s", name, v, serr, wantOf(f, v))
					return
				}
				src[f.Name] = fromEnv
				return
			}
		}
		if n, ok := file[f.Name]; ok {
			if serr := fs.Set(f.Name, n.Value); serr != nil {
				err = fmt.Errorf("config %s:%d:%d: %s %q: %v%s", path, n.Line, n.Column, f.Name, n.Value, serr, wantOf(f, n.Value))
				return
			}
			src[f.Name] = fromFile
			return
		}
		src[f.Name] = fromDefault
	})
	return src, err
}

// otherEnv are the program's environment variables that no setting of
// serve reads under envName: the config file's, the passwords' and the
// diagnosis log's (which a misspelt name is compared with too), then the
// test and script variables (which it is not).
var otherEnv = []string{"CEPHEUS_CONFIG", saslPasswordEnv, redisPasswordEnv, "CEPHEUS_KAFKA_CLIENT_LOG"} // runtime/kafka.ClientLogEnv

var internalEnv = []string{
	failpoint.EnvVar, "CEPHEUS_REDIS_ADDR", "CEPHEUS_REDIS_DIR", "CEPHEUS_KAFKA_DIR", "CEPHEUS_KEEP_KAFKA_LOGS",
	"CEPHEUS_CACHE", "CEPHEUS_LDFLAGS", "CEPHEUS_SEED", "CEPHEUS_STREAM_SEED", "CEPHEUS_CRASH_SEED", "CEPHEUS_SINK_KILL_CHILD",
}

// misspeltEnv returns a warning for each variable of environ (NAME=value)
// named CEPHEUS_ that no setting of fs reads, nor another part of the
// program, and that is close to a variable one reads: a slip that would be
// ignored without a word. A variable far from every one is left alone
// (another tool's, or a script's).
func misspeltEnv(fs *flag.FlagSet, environ []string, skip ...string) []string {
	var read []string // the variables read, as lower-case words without CEPHEUS_
	fs.VisitAll(func(f *flag.Flag) {
		if !slices.Contains(skip, f.Name) {
			read = append(read, envName(f.Name))
		}
	})
	for _, v := range ownEnv {
		read = append(read, v)
	}
	read = append(read, otherEnv...)
	words := make([]string, len(read))
	byWords := map[string]string{}
	for i, v := range read {
		words[i] = envWords(v)
		byWords[words[i]] = v
	}
	var out []string
	for _, kv := range environ {
		name, _, _ := strings.Cut(kv, "=")
		if !strings.HasPrefix(name, "CEPHEUS_") || slices.Contains(read, name) || slices.Contains(internalEnv, name) {
			continue
		}
		if best := rules.Closest(envWords(name), words); best != "" {
			out = append(out, fmt.Sprintf("$%s is no setting and is ignored (did you mean $%s?)", name, byWords[best]))
		}
	}
	slices.Sort(out)
	return out
}

// envWords is an environment variable's name without CEPHEUS_, in lower
// case, _ as - (the setting's name, for a setting's variable).
func envWords(name string) string {
	return strings.ToLower(strings.ReplaceAll(strings.TrimPrefix(name, "CEPHEUS_"), "_", "-"))
}

// listSettings are the settings whose flags take a comma-separated list,
// which a config file may also give as a YAML list.
var listSettings = map[string]bool{"lookup": true, "brokers": true}

// wantOf says what kind of value flag f takes, for the error of a value
// v it refused (the flag package says only "parse error"): for a
// duration, also what is wrong with v.
func wantOf(f *flag.Flag, v string) string {
	if b, ok := f.Value.(interface{ IsBoolFlag() bool }); ok && b.IsBoolFlag() {
		return " (want true or false)"
	}
	if g, ok := f.Value.(flag.Getter); ok {
		if _, ok := g.Get().(time.Duration); ok {
			return " (want a duration such as 500ms, 10s or 5m" + durationFault(v) + ")"
		}
	}
	if _, err := strconv.ParseInt(f.DefValue, 10, 64); err == nil {
		return " (want a whole number)"
	}
	return ""
}

// wellFormedDuration matches what time.ParseDuration reads but for the
// range: a sign, then numbers each with its unit.
var wellFormedDuration = regexp.MustCompile(`^[+-]?((\d+(\.\d*)?|\.\d+)(ns|us|µs|μs|ms|s|m|h))+$`)

// durationFault says what time.ParseDuration finds wrong with v: ": " and
// its reason, or that v is out of range (its message then says only
// "invalid duration"); "" when v parses.
func durationFault(v string) string {
	_, err := time.ParseDuration(v)
	if err == nil {
		return ""
	}
	msg := strings.TrimPrefix(err.Error(), "time: ")
	if strings.HasPrefix(msg, "invalid duration") && wellFormedDuration.MatchString(v) {
		return ": " + strconv.Quote(v) + " is out of range (at most 2562047h, about 292 years)"
	}
	return ": " + msg
}

// printConfig writes the settings of fs as a YAML config file, each with
// where its value came from.
func printConfig(w io.Writer, fs *flag.FlagSet, src map[string]string, skip ...string) {
	fs.VisitAll(func(f *flag.Flag) {
		if slices.Contains(skip, f.Name) {
			return
		}
		fmt.Fprintf(w, "%s: %s # %s\n", f.Name, strconv.Quote(f.Value.String()), src[f.Name])
	})
}
