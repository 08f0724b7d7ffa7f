package conform_test

import (
	"bytes"
	"encoding/json"
	"path/filepath"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/stretchr/testify/require"

	"github.com/procwire/procwire/conform"
	"github.com/procwire/procwire/frames"
)

// TestReportMatchesSchema validates a real report, with a pass, a skip and
// a failure in it, against the checked-in JSON Schema, and its digest.
func TestReportMatchesSchema(t *testing.T) {
	url := brokenServer(t, fault{toClient: func(_ *proxyConn, f frames.Frame) []frames.Frame {
		if o, ok := f.(*frames.Opened); ok && o.Evidence.Executable == "sh" && len(o.Evidence.InstanceID) > 0 {
			g := *o
			g.Evidence.WorkingDirectory = "/elsewhere"
			return []frames.Frame{&g}
		}
		return nil
	}})
	rep := runAgainst(t, url, "handshake-subprotocol", "open-evidence")
	rep.Cases = append(rep.Cases, conform.Result{Name: "handshake-token", Proves: "p", Outcome: conform.Skip, Detail: "no token"})
	rep.Summary.Skip++
	require.Equal(t, conform.Pass, rep.Cases[0].Outcome)
	require.Equal(t, conform.Fail, rep.Cases[1].Outcome)
	require.Equal(t, frames.WireRevision, rep.WireRevision)
	require.NotNil(t, rep.Evidence)

	var out bytes.Buffer
	require.NoError(t, rep.WriteJSON(&out))
	require.NoError(t, conform.VerifyReport(out.Bytes()))

	c := jsonschema.NewCompiler()
	c.AssertContent()
	s, err := c.Compile(filepath.Join("..", "frames", "schema", "conform-report.v1.schema.json"))
	require.NoError(t, err)
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(out.Bytes()))
	require.NoError(t, err)
	require.NoError(t, s.Validate(v), out.String())

	// The compact form verifies too, and a changed byte does not.
	compact, err := json.Marshal(rep)
	require.NoError(t, err)
	require.NoError(t, conform.VerifyReport(compact))
	tampered := bytes.Replace(out.Bytes(), []byte(`"fail"`), []byte(`"pass"`), 1)
	require.ErrorIs(t, conform.VerifyReport(tampered), conform.ErrDigestMismatch)

	// A case without its detail when skipped is refused by the schema.
	var doc map[string]any
	require.NoError(t, json.Unmarshal(out.Bytes(), &doc))
	cases := doc["body"].(map[string]any)["cases"].([]any)
	delete(cases[2].(map[string]any), "detail")
	b, err := json.Marshal(doc)
	require.NoError(t, err)
	v, err = jsonschema.UnmarshalJSON(bytes.NewReader(b))
	require.NoError(t, err)
	require.Error(t, s.Validate(v))
}
