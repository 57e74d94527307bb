package kafka

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestClientKeyEncrypted: a client key protected by a passphrase is
// refused with the file and the cause, in both PEM forms; it read "kafka:
// kafka: TLS client certificate: tls: failed to parse private key". An
// unencrypted key is loaded.
func TestClientKeyEncrypted(t *testing.T) {
	dir := t.TempDir()
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "client"}, NotBefore: time.Now(), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &priv.PublicKey, priv)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	write := func(name string, b *pem.Block) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, pem.EncodeToMemory(b), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	cert := write("client.pem", &pem.Block{Type: "CERTIFICATE", Bytes: der})
	plainKey := write("plain.key", &pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER})
	pkcs8 := write("pkcs8.key", &pem.Block{Type: "ENCRYPTED PRIVATE KEY", Bytes: []byte("ciphertext")})
	traditional := write("traditional.key", &pem.Block{Type: "EC PRIVATE KEY", Headers: map[string]string{"Proc-Type": "4,ENCRYPTED", "DEK-Info": "AES-256-CBC,00112233445566778899AABBCCDDEEFF"}, Bytes: []byte("ciphertext")})
	for _, key := range []string{pkcs8, traditional} {
		_, err := Security{TLS: true, CertFile: cert, KeyFile: key}.opts()
		want := "kafka: TLS client key " + key + " is encrypted (protected by a passphrase), which is not supported: decrypt it into a file only its user may read (openssl pkey -in " + key + " -out KEY; chmod 600 KEY)"
		if err == nil || err.Error() != want {
			t.Errorf("key %s: %v, want %q", filepath.Base(key), err, want)
		}
	}
	if _, err := (Security{TLS: true, CertFile: cert, KeyFile: plainKey}).opts(); err != nil {
		t.Errorf("an unencrypted key: %v", err)
	}
	_, err = (Security{TLS: true, CertFile: cert, KeyFile: cert}).opts()
	if err == nil || !strings.HasPrefix(err.Error(), "kafka: TLS client certificate "+cert+" and key "+cert+": ") {
		t.Errorf("a certificate for a key: %v, want the files named", err)
	}
}
