package kafka

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// Security is how a client's connections to the brokers are secured: TLS
// and SASL. The zero value is plaintext without authentication.
type Security struct {
	// TLS encrypts the connections. The brokers' certificates are checked
	// against CAFile (PEM) when given, else against the system's roots.
	TLS    bool
	CAFile string
	// CertFile and KeyFile (PEM) are a client certificate for brokers
	// that ask for one (mutual TLS); both or neither.
	CertFile, KeyFile string
	// SASL is the mechanism: "" (none), "PLAIN", "SCRAM-SHA-256" or
	// "SCRAM-SHA-512", with User and Password. Password is a secret: it
	// is never printed, and String leaves it out.
	SASL           string
	User, Password string
}

// Validate reports every problem of s, joined.
func (s Security) Validate() error {
	var errs []error
	if !s.TLS && (s.CAFile != "" || s.CertFile != "" || s.KeyFile != "") {
		errs = append(errs, errors.New("kafka: a TLS file is given but TLS is off"))
	}
	if (s.CertFile == "") != (s.KeyFile == "") {
		errs = append(errs, errors.New("kafka: a client certificate needs both its certificate and its key file"))
	}
	switch strings.ToUpper(s.SASL) {
	case "":
		if s.User != "" || s.Password != "" {
			errs = append(errs, errors.New("kafka: a SASL user or password is given without a SASL mechanism"))
		}
	case "PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512":
		if s.User == "" || s.Password == "" {
			errs = append(errs, fmt.Errorf("kafka: SASL %s needs a user and a password", strings.ToUpper(s.SASL)))
		}
	default:
		errs = append(errs, fmt.Errorf("kafka: unknown SASL mechanism %q (PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512)", s.SASL))
	}
	return errors.Join(errs...)
}

// LoginFailed reports whether err is, or wraps, a broker's refusal of a
// SASL login (a wrong user or password, or a mechanism the user has no
// credentials for).
func LoginFailed(err error) bool { return errors.Is(err, kerr.SaslAuthenticationFailed) }

// String describes s without its secret, for logs.
func (s Security) String() string {
	var parts []string
	if s.TLS {
		t := "TLS"
		if s.CAFile != "" {
			t += " (CA " + s.CAFile + ")"
		}
		if s.CertFile != "" {
			t += " with a client certificate"
		}
		parts = append(parts, t)
	}
	if s.SASL != "" {
		parts = append(parts, "SASL "+strings.ToUpper(s.SASL)+" as "+s.User)
	}
	if len(parts) == 0 {
		return "plaintext"
	}
	return strings.Join(parts, ", ")
}

// Load checks s as a client takes it, its files read (the CA, the client
// certificate): what a client would fail on, before any broker is asked.
func (s Security) Load() error {
	_, err := s.opts()
	return err
}

// opts are the client options of s.
func (s Security) opts() ([]kgo.Opt, error) {
	if err := s.Validate(); err != nil {
		return nil, err
	}
	var opts []kgo.Opt
	if s.TLS {
		cfg := &tls.Config{MinVersion: tls.VersionTLS12}
		if s.CAFile != "" {
			pem, err := os.ReadFile(s.CAFile)
			if err != nil {
				return nil, fmt.Errorf("kafka: TLS CA: %w", err)
			}
			pool := x509.NewCertPool()
			if !pool.AppendCertsFromPEM(pem) {
				return nil, fmt.Errorf("kafka: TLS CA %s: no PEM certificate in it", s.CAFile)
			}
			cfg.RootCAs = pool
		}
		if s.CertFile != "" {
			cert, err := loadClientCert(s.CertFile, s.KeyFile)
			if err != nil {
				return nil, err
			}
			cfg.Certificates = []tls.Certificate{cert}
		}
		// The server name of each broker is its host, set per dial.
		d := &tls.Dialer{NetDialer: &net.Dialer{Timeout: 10 * time.Second}, Config: cfg}
		opts = append(opts, kgo.Dialer(d.DialContext))
	}
	var m sasl.Mechanism
	switch strings.ToUpper(s.SASL) {
	case "PLAIN":
		m = plain.Auth{User: s.User, Pass: s.Password}.AsMechanism()
	case "SCRAM-SHA-256":
		m = scram.Auth{User: s.User, Pass: s.Password}.AsSha256Mechanism()
	case "SCRAM-SHA-512":
		m = scram.Auth{User: s.User, Pass: s.Password}.AsSha512Mechanism()
	}
	if m != nil {
		opts = append(opts, kgo.SASL(m))
	}
	return opts, nil
}

// loadClientCert loads the client certificate and its key. A key
// encrypted with a passphrase (PKCS#8 "ENCRYPTED PRIVATE KEY", or a
// traditional PEM block with "Proc-Type: 4,ENCRYPTED") is refused saying
// so: crypto/tls reads only unencrypted keys, and said "failed to parse
// private key", which named neither the file nor the cause.
func loadClientCert(certFile, keyFile string) (tls.Certificate, error) {
	key, err := os.ReadFile(keyFile)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("kafka: TLS client key: %w", err)
	}
	for rest := key; ; {
		var b *pem.Block
		if b, rest = pem.Decode(rest); b == nil {
			break
		}
		if b.Type == "ENCRYPTED PRIVATE KEY" || strings.Contains(b.Headers["Proc-Type"], "ENCRYPTED") {
			return tls.Certificate{}, fmt.Errorf("kafka: TLS client key %s is encrypted (protected by a passphrase), which is not supported: decrypt it into a file only its user may read (openssl pkey -in %s -out KEY; chmod 600 KEY)", keyFile, keyFile)
		}
	}
	certPEM, err := os.ReadFile(certFile)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("kafka: TLS client certificate: %w", err)
	}
	cert, err := tls.X509KeyPair(certPEM, key)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("kafka: TLS client certificate %s and key %s: %w", certFile, keyFile, err)
	}
	return cert, nil
}

// Conn is how to reach a cluster: its seed brokers (host:port each) and
// the security of the connections.
type Conn struct {
	Brokers  []string
	Security Security
}

// newClient makes a client of c with more options.
func (c Conn) newClient(more ...kgo.Opt) (*kgo.Client, error) {
	if len(c.Brokers) == 0 {
		return nil, errors.New("kafka: no brokers given")
	}
	sec, err := c.Security.opts()
	if err != nil {
		return nil, err
	}
	opts := append([]kgo.Opt{kgo.SeedBrokers(c.Brokers...), metadataMinAge}, sec...)
	if l := clientLogger(); l != nil {
		opts = append(opts, kgo.WithLogger(l))
	}
	cl, err := kgo.NewClient(append(opts, more...)...)
	if err != nil {
		return nil, fmt.Errorf("kafka: %w", err)
	}
	return cl, nil
}

// ClientLogEnv names a file that every Kafka client of the process
// appends its log to (franz-go's, at INFO: connections, metadata, group
// joins, the producer's ids and epochs, transactions' ends, failed
// batches), each line with the time and the process id; unset, the
// clients log nothing. For diagnosing a run against the brokers.
const ClientLogEnv = "CEPHEUS_KAFKA_CLIENT_LOG"

var clientLogger = sync.OnceValue(func() kgo.Logger {
	path := os.Getenv(ClientLogEnv)
	if path == "" {
		return nil
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		fmt.Fprintf(os.Stderr, "warning: %s: %v: the Kafka clients log nothing\n", ClientLogEnv, err)
		return nil
	}
	pid := os.Getpid()
	return kgo.BasicLogger(f, kgo.LogLevelInfo, func() string {
		return fmt.Sprintf("%s [%d] ", time.Now().Format("15:04:05.000"), pid)
	})
})
