package main

import (
	"bufio"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/cepheus-cep/cepheus/cep"
)

// The environment variables of the Kafka security settings. The SASL
// password comes from the environment or the config file, never from a
// flag (a command line is visible to every user of the machine).
const (
	kafkaConfigEnv   = "CEPHEUS_KAFKA_CONFIG"
	tlsCAEnv         = "CEPHEUS_KAFKA_TLS_CA"
	saslMechanismEnv = "CEPHEUS_KAFKA_SASL_MECHANISM"
	saslUserEnv      = "CEPHEUS_KAFKA_SASL_USER"
	saslPasswordEnv  = "CEPHEUS_KAFKA_SASL_PASSWORD"
)

// kafkaSecurityHelp is the help paragraph of the commands that talk to
// Kafka.
const kafkaSecurityHelp = `Security: -tls encrypts the connections (-tls-ca FILE checks the brokers'
certificates against a PEM CA, else the system's roots; -tls-cert and
-tls-key give a client certificate); -sasl PLAIN|SCRAM-SHA-256|SCRAM-SHA-512
with -sasl-user authenticates, the password coming from $` + saslPasswordEnv + `
or the config file, never from a flag. -kafka-config FILE (or $` + kafkaConfigEnv + `)
holds the same settings as key=value lines: tls, tls.ca, tls.cert, tls.key,
sasl.mechanism, sasl.username, sasl.password. Flags win over the
environment ($` + tlsCAEnv + `, $` + saslMechanismEnv + `, $` + saslUserEnv + `),
which wins over the file. Secrets are never printed.`

// kafkaSecurityFlags are the security flags of a command.
type kafkaSecurityFlags struct {
	config, ca, cert, key, mechanism, user string
	tls                                    bool
}

func addKafkaSecurityFlags(fs *flagSet) *kafkaSecurityFlags {
	f := &kafkaSecurityFlags{}
	fs.StringVar(&f.config, "kafka-config", "", "file of Kafka security settings, key=value lines (default: $"+kafkaConfigEnv+")")
	fs.BoolVar(&f.tls, "tls", false, "connect to the brokers with TLS")
	fs.StringVar(&f.ca, "tls-ca", "", "the PEM CA the brokers' certificates are checked against (default: the system's roots; $"+tlsCAEnv+"); implies -tls")
	fs.StringVar(&f.cert, "tls-cert", "", "a PEM client certificate (with -tls-key); implies -tls")
	fs.StringVar(&f.key, "tls-key", "", "the PEM key of -tls-cert")
	fs.StringVar(&f.mechanism, "sasl", "", "SASL mechanism: PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512 ($"+saslMechanismEnv+"); the password from $"+saslPasswordEnv+" or -kafka-config")
	fs.StringVar(&f.user, "sasl-user", "", "SASL user ($"+saslUserEnv+")")
	return f
}

// security builds the settings: the config file, then the environment,
// then the flags given. A config file that holds a password and that
// others may read is warned of on stderr.
func (f *kafkaSecurityFlags) security(fs *flagSet, stderr io.Writer) (cep.KafkaSecurity, error) {
	var s cep.KafkaSecurity
	path := f.config
	if path == "" {
		path = os.Getenv(kafkaConfigEnv)
	}
	if path != "" {
		if err := readKafkaConfig(path, &s); err != nil {
			return s, err
		}
		if st, err := os.Stat(path); err == nil && s.Password != "" && st.Mode().Perm()&0o077 != 0 {
			fmt.Fprintf(stderr, "%s: warning: %s holds a password and others may read it (mode %04o): chmod 600 %s\n",
				fs.cmd.name, path, st.Mode().Perm(), path)
		}
	}
	env := func(name string, to *string) {
		if v := os.Getenv(name); v != "" {
			*to = v
		}
	}
	env(tlsCAEnv, &s.CAFile)
	env(saslMechanismEnv, &s.SASL)
	env(saslUserEnv, &s.User)
	env(saslPasswordEnv, &s.Password)
	given := map[string]bool{}
	fs.Visit(func(fl *flag.Flag) { given[fl.Name] = true })
	if given["tls"] {
		s.TLS = f.tls
	}
	for _, o := range []struct {
		flag string
		v    string
		to   *string
	}{{"tls-ca", f.ca, &s.CAFile}, {"tls-cert", f.cert, &s.CertFile}, {"tls-key", f.key, &s.KeyFile}, {"sasl", f.mechanism, &s.SASL}, {"sasl-user", f.user, &s.User}} {
		if given[o.flag] {
			*o.to = o.v
		}
	}
	if s.CAFile != "" || s.CertFile != "" {
		if given["tls"] && !f.tls {
			// Plain text asked for, a certificate set (perhaps by the
			// environment or a config file): neither is taken silently.
			return s, fs.usagef("-tls=false, but a CA (-tls-ca, $%s or tls.ca) or a client certificate (-tls-cert or tls.cert) is set, which only TLS uses: drop one or the other", tlsCAEnv)
		}
		s.TLS = true
	}
	s.SASL = strings.ToUpper(s.SASL)
	if err := s.Validate(); err != nil {
		return s, fs.usagef("%s", strings.TrimPrefix(err.Error(), "kafka: "))
	}
	return s, nil
}

// loginHint names the user and mechanism in the error of a refused SASL
// login: the broker's message names neither, and the user may have come
// from a flag, the environment or a -kafka-config file.
func loginHint(err error, s cep.KafkaSecurity) error {
	if err == nil || s.SASL == "" || !cep.KafkaLoginFailed(err) {
		return err
	}
	return fmt.Errorf("%w\n  the brokers refused SASL %s as user %q: check the user (-sasl-user, $%s, sasl.username) and its password ($%s, sasl.password)",
		err, s.SASL, s.User, saslUserEnv, saslPasswordEnv)
}

// readKafkaConfig reads key=value lines ('#' comments, blank lines) into s.
func readKafkaConfig(path string, s *cep.KafkaSecurity) error {
	file, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("kafka config: %w", err)
	}
	defer file.Close()
	sc := bufio.NewScanner(file)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		if !ok {
			return fmt.Errorf("%s:%d: want key=value", path, n)
		}
		switch k {
		case "tls":
			b, err := strconv.ParseBool(v)
			if err != nil {
				return fmt.Errorf("%s:%d: tls=%q: want true or false", path, n, v)
			}
			s.TLS = b
		case "tls.ca":
			s.CAFile = v
		case "tls.cert":
			s.CertFile = v
		case "tls.key":
			s.KeyFile = v
		case "sasl.mechanism":
			s.SASL = v
		case "sasl.username":
			s.User = v
		case "sasl.password":
			s.Password = v
		default:
			return fmt.Errorf("%s:%d: unknown key %q (tls, tls.ca, tls.cert, tls.key, sasl.mechanism, sasl.username, sasl.password)", path, n, k)
		}
	}
	return sc.Err()
}

func init() {
	for _, c := range []*command{produceCommand, consumeCommand, runCommand, serveCommand, backtestCommand} {
		c.help = strings.TrimRight(c.help, "\n") + "\n\n" + kafkaSecurityHelp + "\n"
	}
}
