package main

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"io"
	"strings"

	"github.com/gpuledger/gpuledger/api"
)

func runToken(_ context.Context, args []string, stdout io.Writer) error {
	fs := newFlagSet("token", stdout)
	name := fs.String("name", "", "the token's name, a DNS label such as vmagent (required)")
	scopes := fs.String("scope", "", "comma-separated scopes: write, viewer, admin, team:<name> (required)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *name == "" || *scopes == "" {
		return usageError{"token needs -name and -scope, such as -name vmagent -scope write"}
	}
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return err
	}
	secret := "glt_" + base64.RawURLEncoding.EncodeToString(b)
	sum := api.HashToken(secret)
	var quoted []string
	for _, s := range splitList(*scopes) {
		quoted = append(quoted, fmt.Sprintf("%q", s))
	}
	fmt.Fprintf(stdout, "secret (send as Authorization: Bearer <secret>; it is not stored anywhere):\n  %s\n\n", secret)
	fmt.Fprintf(stdout, "add to the configuration under auth.tokens (or to the -auth.tokensFile):\n  - {name: %s, sha256: %s, scopes: [%s]}\n",
		*name, hex.EncodeToString(sum[:]), strings.Join(quoted, ", "))
	return nil
}
