package main

import (
	"context"
	"encoding/hex"
	"fmt"
	"io"
	"strings"

	"github.com/gpuledger/gpuledger/api"
	"github.com/gpuledger/gpuledger/internal/flagutil"
)

func runToken(_ context.Context, args []string, stdout io.Writer) error {
	fs := newFlagSet("token", stdout)
	name := fs.String("name", "", "the token's name, a DNS label such as vmagent (required)")
	scopes := fs.String("scope", "", "comma-separated scopes: write, viewer, admin, team:<name> (required)")
	if err := flagutil.Parse(fs, args); err != nil {
		return err
	}
	if *name == "" || *scopes == "" {
		return flagutil.Usagef("token needs -name and -scope, such as -name vmagent -scope write")
	}
	secret, err := api.NewSecret()
	if err != nil {
		return err
	}
	sum := api.HashToken(secret)
	var quoted []string
	for _, s := range flagutil.Split(*scopes) {
		quoted = append(quoted, fmt.Sprintf("%q", s))
	}
	fmt.Fprintf(stdout, "secret (send as Authorization: Bearer <secret>; it is not stored anywhere):\n  %s\n\n", secret)
	fmt.Fprintf(stdout, "add to the configuration under auth.tokens (or to the -auth.tokensFile):\n  - {name: %s, sha256: %s, scopes: [%s]}\n",
		*name, hex.EncodeToString(sum[:]), strings.Join(quoted, ", "))
	return nil
}
