package main

import (
	"errors"
	"fmt"
	"os"
	"strings"
)

// tokenEnv names the environment variable holding the bearer token.
const tokenEnv = "PROCWIRE_TOKEN"

// readToken returns the token in file, or $PROCWIRE_TOKEN when file is
// empty. An empty token file is an error; no token at all is "".
func readToken(file string) (string, error) {
	if file == "" {
		return os.Getenv(tokenEnv), nil
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return "", fmt.Errorf("--token-file: %w", err)
	}
	t := strings.TrimSpace(string(b))
	if t == "" {
		return "", errors.New("--token-file " + file + ": empty")
	}
	return t, nil
}
