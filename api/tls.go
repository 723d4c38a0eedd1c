package api

import (
	"crypto/tls"
	"fmt"
	"os"
	"sync"
	"time"
)

// certReloader serves a certificate from files and loads them again when
// they change (a renewed certificate mounted from a Secret), checked at most
// every interval.
type certReloader struct {
	certFile, keyFile string
	interval          time.Duration

	mu      sync.Mutex
	cert    *tls.Certificate
	modTime time.Time
	checked time.Time
}

func newCertReloader(certFile, keyFile string) (*certReloader, error) {
	r := &certReloader{certFile: certFile, keyFile: keyFile, interval: 10 * time.Second}
	if err := r.load(); err != nil {
		return nil, err
	}
	return r, nil
}

func (r *certReloader) load() error {
	st, err := os.Stat(r.certFile)
	if err != nil {
		return fmt.Errorf("TLS certificate: %w", err)
	}
	kst, err := os.Stat(r.keyFile)
	if err != nil {
		return fmt.Errorf("TLS key: %w", err)
	}
	mod := st.ModTime()
	if kst.ModTime().After(mod) {
		mod = kst.ModTime()
	}
	if r.cert != nil && !mod.After(r.modTime) {
		return nil
	}
	cert, err := tls.LoadX509KeyPair(r.certFile, r.keyFile)
	if err != nil {
		return fmt.Errorf("load TLS certificate %s and key %s: %w", r.certFile, r.keyFile, err)
	}
	r.cert, r.modTime = &cert, mod
	return nil
}

// getCertificate is tls.Config.GetCertificate: the current certificate,
// reloaded if its files changed. A failed reload keeps the old one.
func (r *certReloader) getCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if now := time.Now(); now.Sub(r.checked) >= r.interval {
		r.checked = now
		_ = r.load() // keep serving the previous certificate on error
	}
	return r.cert, nil
}
