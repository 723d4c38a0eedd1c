package api

import (
	"crypto/rand"
	"encoding/base64"
	"flag"
	"log/slog"
	"time"

	"github.com/gpuledger/gpuledger/config"
	"github.com/gpuledger/gpuledger/internal/flagutil"
)

// ServeFlags are `gpuledger serve`'s flags of the API server: where it
// listens, TLS, tokens, remote write and the read cache.
type ServeFlags struct {
	Options     Options
	Listen      string
	TokensFile  string
	NoAuth      bool
	RemoteWrite bool
}

// Register registers the flags, each setting a field of f.
func (f *ServeFlags) Register(fs *flag.FlagSet) {
	o := &f.Options
	fs.StringVar(&f.Listen, "http.listenAddr", "127.0.0.1:8080", "address the API listens on")
	fs.StringVar(&o.TLSCertFile, "http.tlsCertFile", "", "TLS certificate (PEM) to serve HTTPS with; read again when its contents change (a pair that does not load keeps the old one, logged and counted in gpuledger_reload_failures_total)")
	fs.StringVar(&o.TLSKeyFile, "http.tlsKeyFile", "", "TLS private key (PEM) of -http.tlsCertFile")
	fs.StringVar(&f.TokensFile, "auth.tokensFile", "", "YAML file of more API tokens (tokens: [{name, sha256, scopes}]), such as a mounted Secret; read again when its contents change (a token taken out is refused within 10 s)")
	fs.BoolVar(&f.NoAuth, "auth.disabled", false, "serve without tokens: anyone who reaches the port reads every team's costs and writes samples; for a trial on 127.0.0.1 only")
	fs.BoolVar(&f.RemoteWrite, "remoteWrite", true, "accept Prometheus remote write on POST /api/v1/write")
	fs.Int64Var(&o.MaxRemoteWriteBytes, "remoteWrite.maxBytes", 16<<20, "largest compressed remote-write body; larger ones are answered 413")
	fs.DurationVar(&o.CacheTTL, "http.cacheTTL", 30*time.Second, "how long answers of the read routes are kept (dropped at once when serve writes the ledger, or, on the embedded ledger, when another process such as gpuledger ingest does); 0 turns the cache off")
}

// TokensOf reads the API tokens of the configuration and of the token
// file (which serve reads again when it changes).
func TokensOf(cfg *config.Config, tokensFile string) ([]Token, error) {
	toks, err := cfg.AllTokens(tokensFile)
	out := make([]Token, len(toks))
	for i, t := range toks {
		if err == nil {
			out[i], err = NewToken(t.Name, t.SHA256, t.Scopes)
		}
	}
	return out, err
}

// NewSecret makes a token's secret: "glt_" and 32 random bytes, base64url.
func NewSecret() (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return "glt_" + base64.RawURLEncoding.EncodeToString(b), nil
}

// SoleAdmin is the Auth of a process that calls itself alone (such as the
// MCP server): one admin token, whose secret it returns.
func SoleAdmin(name string) (*Auth, string, error) {
	secret, err := NewSecret()
	if err != nil {
		return nil, "", err
	}
	return NewAuth([]Token{{Name: name, SHA256: HashToken(secret), Scopes: []Scope{ScopeAdmin}}}), secret, nil
}

// LoadAuth collects the tokens of the configuration and the token file.
// Without any it refuses, unless disabled, which it logs as a warning.
func LoadAuth(cfg *config.Config, tokensFile string, disabled bool, listen string, log *slog.Logger) (*Auth, error) {
	toks, err := TokensOf(cfg, tokensFile)
	if err != nil {
		return nil, err
	}
	if disabled {
		log.Warn("authentication disabled: anyone who reaches the port reads every team's costs and writes samples", "addr", listen)
		return nil, nil
	}
	if len(toks) == 0 {
		return nil, flagutil.Usagef("serve needs API tokens: add auth.tokens to the configuration or pass -auth.tokensFile (gpuledger token -name NAME -scope SCOPE makes one), or pass -auth.disabled for a trial on 127.0.0.1")
	}
	return NewAuth(toks), nil
}
