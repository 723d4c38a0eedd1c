package api

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
	"testing"
	"time"
)

// writeCert writes a self-signed certificate for 127.0.0.1 with serial.
func writeCert(t *testing.T, dir string, serial int64, mod time.Time) (string, string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: "gpuledger"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), DNSNames: []string{"localhost"}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kb, _ := x509.MarshalECPrivateKey(key)
	cert, keyPath := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	os.WriteFile(cert, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600)
	os.WriteFile(keyPath, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}), 0o600)
	os.Chtimes(cert, mod, mod)
	os.Chtimes(keyPath, mod, mod)
	return cert, keyPath
}

// TestCertReload: a renewed certificate written over the files is served
// from the next check on; a broken one keeps the old in service.
func TestCertReload(t *testing.T) {
	dir := t.TempDir()
	t0 := time.Now().Add(-time.Minute)
	cert, key := writeCert(t, dir, 1, t0)
	r, err := newCertReloader(cert, key)
	if err != nil {
		t.Fatal(err)
	}
	r.interval = 0
	serial := func() int64 {
		c, err := r.getCertificate(nil)
		if err != nil {
			t.Fatal(err)
		}
		x, err := x509.ParseCertificate(c.Certificate[0])
		if err != nil {
			t.Fatal(err)
		}
		return x.SerialNumber.Int64()
	}
	if s := serial(); s != 1 {
		t.Fatalf("serial %d, want 1", s)
	}
	writeCert(t, dir, 2, t0.Add(30*time.Second))
	if s := serial(); s != 2 {
		t.Errorf("after renewal: serial %d, want 2", s)
	}
	os.WriteFile(cert, []byte("not a certificate"), 0o600)
	os.Chtimes(cert, t0.Add(50*time.Second), t0.Add(50*time.Second))
	if s := serial(); s != 2 {
		t.Errorf("after a broken write: serial %d, want the old 2", s)
	}
	if _, err := newCertReloader(filepath.Join(dir, "missing"), key); err == nil {
		t.Error("a missing certificate was accepted")
	}
}
