package api

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"

	"github.com/labstack/echo/v4"
)

// Scope is what a token may do: ScopeWrite (remote write only),
// ScopeViewer (read every team's costs), ScopeAdmin (everything), or
// "team:<name>" (read that team's costs only: every query is filtered to
// it, reports and workloads included).
type Scope string

// Scopes of a token.
const (
	ScopeWrite  Scope = "write"
	ScopeViewer Scope = "viewer"
	ScopeAdmin  Scope = "admin"
	// ScopeTeamPrefix starts a team scope: team:ml-research.
	ScopeTeamPrefix = "team:"
)

// Token is one bearer token the server accepts: its name (for logs and the
// per-sender counters) and the SHA-256 of the secret, never the secret.
type Token struct {
	Name   string
	SHA256 [sha256.Size]byte
	Scopes []Scope
}

// HashToken returns the SHA-256 a Token keeps of a secret.
func HashToken(secret string) [sha256.Size]byte { return sha256.Sum256([]byte(secret)) }

// Auth checks bearer tokens. A nil *Auth lets every request through, as
// the anonymous admin: for the demo and tests only.
type Auth struct {
	tokens atomic.Pointer[[]Token]
}

// NewAuth returns an Auth accepting tokens.
func NewAuth(tokens []Token) *Auth {
	a := &Auth{}
	a.SetTokens(tokens)
	return a
}

// SetTokens replaces the tokens accepted, from the next request on: a
// token taken out (a rotated Secret) is refused at once, with no restart.
func (a *Auth) SetTokens(tokens []Token) {
	t := slices.Clone(tokens)
	a.tokens.Store(&t)
}

// principal is who a request comes from.
type principal struct {
	name   string
	scopes []Scope
}

func (p *principal) has(s Scope) bool { return slices.Contains(p.scopes, s) }

// teams returns the teams of the principal's team scopes.
func (p *principal) teams() []string {
	var out []string
	for _, s := range p.scopes {
		if t, ok := strings.CutPrefix(string(s), ScopeTeamPrefix); ok {
			out = append(out, t)
		}
	}
	return out
}

// anonymous is the principal when auth is off.
var anonymous = &principal{name: "anonymous", scopes: []Scope{ScopeAdmin}}

// authError is a request without a valid token (401) or with one that may
// not do what it asks (403).
type authError struct {
	code int
	msg  string
}

func (e *authError) Error() string { return e.msg }

func (a *Auth) authenticate(r *http.Request) (*principal, error) {
	if a == nil {
		return anonymous, nil
	}
	h := r.Header.Get("Authorization")
	secret, ok := strings.CutPrefix(h, "Bearer ")
	if !ok || secret == "" {
		return nil, &authError{http.StatusUnauthorized, "missing bearer token; send Authorization: Bearer <token> (gpuledger token makes one)"}
	}
	sum := HashToken(strings.TrimSpace(secret))
	var found *Token
	tokens := *a.tokens.Load()
	for i := range tokens {
		// Compare every token, in constant time, so that timing says
		// nothing of which was close.
		if subtle.ConstantTimeCompare(sum[:], tokens[i].SHA256[:]) == 1 {
			found = &tokens[i]
		}
	}
	if found == nil {
		return nil, &authError{http.StatusUnauthorized, "bearer token not recognised; check the token, or that its hash is in the configuration"}
	}
	return &principal{name: found.Name, scopes: found.Scopes}, nil
}

const principalKey = "gpuledger.principal"

// require is middleware: the request's token must carry one of scopes (a
// team scope counts as "team"), else 401 or 403.
func (s *Server) require(scopes ...string) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			p, err := s.opts.Auth.authenticate(c.Request())
			if err != nil {
				c.Response().Header().Set("WWW-Authenticate", `Bearer realm="gpuledger"`)
				return err
			}
			if !p.has(ScopeAdmin) {
				allowed := false
				for _, want := range scopes {
					allowed = allowed || p.has(Scope(want)) || want == "team" && len(p.teams()) > 0
				}
				if !allowed {
					return &authError{http.StatusForbidden, fmt.Sprintf("token %q may not use %s %s; it needs one of the scopes %s",
						p.name, c.Request().Method, c.Path(), strings.Join(append([]string{"admin"}, scopes...), ", "))}
				}
			}
			c.Set(principalKey, p)
			return next(c)
		}
	}
}

func principalOf(c echo.Context) *principal {
	if p, ok := c.Get(principalKey).(*principal); ok {
		return p
	}
	return anonymous
}

// teamFilter returns the team a read must be filtered to: the request's
// team parameter, which a team-scoped token must be allowed to read; for
// such a token without one, its only team. Empty means all teams.
func teamFilter(c echo.Context, requested string) (string, error) {
	p := principalOf(c)
	if p.has(ScopeAdmin) || p.has(ScopeViewer) {
		return requested, nil
	}
	teams := p.teams()
	switch {
	case requested != "" && slices.Contains(teams, requested):
		return requested, nil
	case requested != "":
		return "", &authError{http.StatusForbidden, fmt.Sprintf("token %q may read team(s) %s only, not team=%q", p.name, strings.Join(teams, ", "), requested)}
	case len(teams) == 1:
		return teams[0], nil
	}
	return "", badf("token %q may read several teams (%s); name one with team=", p.name, strings.Join(teams, ", "))
}

// NewToken is a Token from its name, the hex of its secret's SHA-256 and
// its scopes, as the configuration writes them.
func NewToken(name, sha256Hex string, scopes []string) (Token, error) {
	t := Token{Name: name}
	if _, err := hex.Decode(t.SHA256[:], []byte(sha256Hex)); err != nil || len(sha256Hex) != 2*sha256.Size {
		return Token{}, fmt.Errorf("token %s: sha256 %q: want %d hex digits", name, sha256Hex, 2*sha256.Size)
	}
	for _, sc := range scopes {
		t.Scopes = append(t.Scopes, Scope(sc))
	}
	return t, nil
}
