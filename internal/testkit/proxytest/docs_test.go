package proxytest

import (
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// fenced returns the first code block of doc fenced as lang.
func fenced(t *testing.T, doc, lang string) string {
	t.Helper()
	_, after, ok := strings.Cut(doc, "\n```"+lang+"\n")
	require.True(t, ok, "no ```%s block", lang)
	block, _, ok := strings.Cut(after, "\n```\n")
	require.True(t, ok, "unterminated ```%s block", lang)
	return block + "\n"
}

// TestDocsNginxConfigIsTheTestedOne: the nginx configuration of
// docs/proxies.md is nginx.conf.tmpl, the one the tests run, rendered with
// the addresses the document uses.
func TestDocsNginxConfigIsTheTestedOne(t *testing.T) {
	doc, err := os.ReadFile("../../../docs/proxies.md")
	require.NoError(t, err)
	want, err := renderNginx(nginxConfig{Listen: "127.0.0.1:8080", Backends: []string{"127.0.0.1:7777", "127.0.0.1:7778"}})
	require.NoError(t, err)
	require.Equal(t, want, fenced(t, string(doc), "nginx"))
}

// TestDocsCaddyfileIsTheTestedOne: the same for Caddyfile.tmpl.
func TestDocsCaddyfileIsTheTestedOne(t *testing.T) {
	doc, err := os.ReadFile("../../../docs/proxies.md")
	require.NoError(t, err)
	want, err := renderCaddy(nginxConfig{Listen: "127.0.0.1:8080", Backends: []string{"127.0.0.1:7777", "127.0.0.1:7778"}})
	require.NoError(t, err)
	require.Equal(t, want, fenced(t, string(doc), "caddyfile"))
}
