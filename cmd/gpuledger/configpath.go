package main

import (
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"log/slog"
	"os"

	"github.com/gpuledger/gpuledger/config"
)

// Where a command looks for its configuration when -config is not given.
const (
	configEnv      = "GPULEDGER_CONFIG"
	configStandard = "/etc/gpuledger/config.yaml"
	configExample  = "examples/cluster.yaml"
)

// configFlag registers -config with the search order in its help.
func configFlag(fs *flag.FlagSet, what string) *string {
	return fs.String("config", "", fmt.Sprintf("%s; default: $%s, else %s, else %s in a checkout of the repository", what, configEnv, configStandard, configExample))
}

// findConfig says which configuration file to read and why: the flag, the
// environment variable, the standard path, or the repository's example
// (for a checkout).
func findConfig(flagValue string) (path, why string, err error) {
	switch {
	case flagValue != "":
		return flagValue, "-config", nil
	case os.Getenv(configEnv) != "":
		return os.Getenv(configEnv), "$" + configEnv, nil
	}
	for _, c := range []struct{ path, why string }{{configStandard, "the standard path"}, {configExample, "the example of this checkout"}} {
		if _, err := os.Stat(c.path); err == nil {
			return c.path, c.why, nil
		} else if !errors.Is(err, fs.ErrNotExist) {
			return "", "", fmt.Errorf("config %s: %w", c.path, err)
		}
	}
	return "", "", usageError{fmt.Sprintf("no configuration found: pass -config, set %s, or put one at %s (%s in the repository shows the format)",
		configEnv, configStandard, configExample)}
}

// loadConfig finds, reports (on stderr) and reads the configuration.
func loadConfig(flagValue string) (*config.Config, string, error) {
	path, why, err := findConfig(flagValue)
	if err != nil {
		return nil, "", err
	}
	fmt.Fprintf(os.Stderr, "gpuledger: configuration %s (from %s)\n", path, why)
	cfg, err := config.Load(path)
	return cfg, path, err
}

// parseWithConfig parses a command's flags, makes its logger and loads
// its configuration.
func parseWithConfig(fs *flag.FlagSet, args []string, cfgPath *string, newLogger func() *slog.Logger) (*slog.Logger, *config.Config, error) {
	if err := parseFlags(fs, args); err != nil {
		return nil, nil, err
	}
	log := newLogger()
	cfg, _, err := loadConfig(*cfgPath)
	return log, cfg, err
}
