package api

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"log/slog"
	"math/big"
	"os"
	"path/filepath"
	"strings"
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
// from the next check on, whatever the files' times say (one copied with
// an older mtime too); a broken or mismatched pair keeps the old one in
// service, logged once and counted.
func TestCertReload(t *testing.T) {
	dir := t.TempDir()
	t0 := time.Now().Add(-time.Minute)
	cert, key := writeCert(t, dir, 1, t0)
	var ok, failed int
	var logged bytes.Buffer
	r, err := newCertReloader(cert, key, slog.New(slog.NewTextHandler(&logged, nil)), func(err error) {
		if err != nil {
			failed++
		} else {
			ok++
		}
	})
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
	if s := serial(); s != 2 || ok != 1 {
		t.Errorf("after renewal: serial %d, %d reloads; want 2, 1", s, ok)
	}
	// Renewed again, the files copied with a time older than before.
	writeCert(t, dir, 3, t0.Add(-time.Hour))
	if s := serial(); s != 3 {
		t.Errorf("after a renewal with an older mtime: serial %d, want 3", s)
	}
	// A key of another pair: the certificate in service stays; logged
	// and counted once, however often it is checked.
	other := t.TempDir()
	_, otherKey := writeCert(t, other, 9, t0)
	kb, _ := os.ReadFile(otherKey)
	os.WriteFile(key, kb, 0o600)
	for range 3 {
		if s := serial(); s != 3 {
			t.Errorf("after a mismatched key: serial %d, want the old 3", s)
		}
	}
	if failed != 1 || strings.Count(logged.String(), "TLS certificate not reloaded") != 1 {
		t.Errorf("a mismatched pair: %d failures counted, log %q; want one of each", failed, logged.String())
	}
	os.WriteFile(cert, []byte("not a certificate"), 0o600)
	if s := serial(); s != 3 || failed != 2 {
		t.Errorf("after a broken write: serial %d, %d failures; want the old 3, 2", s, failed)
	}
	writeCert(t, dir, 4, t0)
	if s := serial(); s != 4 {
		t.Errorf("after a good pair again: serial %d, want 4", s)
	}
	if _, err := newCertReloader(filepath.Join(dir, "missing"), key, nil, nil); err == nil {
		t.Error("a missing certificate was accepted")
	}
}
