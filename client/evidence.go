package client

import (
	"fmt"

	"github.com/procwire/procwire/frames"
)

// identityOperation names evidence checks in a *ProtocolError.
const identityOperation = "open_process_identity"

type evidenceField struct{ name, value string }

// evidenceFields lists e's fields in canonical order with their JSON names.
func evidenceFields(e *frames.Evidence) [9]evidenceField {
	return [...]evidenceField{
		{"wire_revision", e.WireRevision},
		{"provider", e.Provider},
		{"provider_revision", e.ProviderRevision},
		{"instance_id", e.InstanceID},
		{"process_id", e.ProcessID},
		{"executable", e.Executable},
		{"working_directory", e.WorkingDirectory},
		{"arguments_digest", e.ArgumentsDigest},
		{"started_at", e.StartedAt},
	}
}

// firstDifference compares got with want field by field, byte for byte, and
// names the first field (in canonical order) that differs, skipping fields
// want leaves empty when partial is set.
func firstDifference(got, want *frames.Evidence, partial bool) error {
	g, w := evidenceFields(got), evidenceFields(want)
	for i := range g {
		if partial && w[i].value == "" {
			continue
		}
		if g[i].value != w[i].value {
			return &ProtocolError{
				Operation: identityOperation,
				Field:     "evidence." + g[i].name,
				Detail:    fmt.Sprintf("%q, expected %q", g[i].value, w[i].value),
			}
		}
	}
	return nil
}

// checkOpened compares the evidence of o with what was asked for
// (PROTOCOL.md §6).
func checkOpened(o *frames.Opened, instanceID string, req *frames.ProcessRequest) error {
	want := frames.Evidence{
		WireRevision:     frames.WireRevision,
		InstanceID:       instanceID,
		ProcessID:        o.ProcessID,
		Executable:       req.Executable,
		WorkingDirectory: req.WorkingDirectory,
		ArgumentsDigest:  frames.ArgumentsDigest(req.Arguments),
	}
	return firstDifference(&o.Evidence, &want, true)
}

// checkResumed checks that r is about the process opened with evidence
// first: the same id and byte-identical evidence.
func checkResumed(r *frames.Resumed, id string, first *frames.Evidence) error {
	if r.ProcessID != id {
		return &ProtocolError{
			Operation: identityOperation,
			Field:     "process_id",
			Detail:    fmt.Sprintf("%q, expected %q", r.ProcessID, id),
		}
	}
	return firstDifference(&r.Evidence, first, false)
}

// checkAttached checks that r, the first answer to Attach, is about the
// process h names.
func checkAttached(r *frames.Resumed, h *Handle) error {
	for _, c := range [...]struct{ field, got, want string }{
		{"process_id", r.ProcessID, h.ProcessID},
		{"evidence.process_id", r.Evidence.ProcessID, h.ProcessID},
		{"evidence.instance_id", r.Evidence.InstanceID, h.InstanceID},
		{"evidence.wire_revision", r.Evidence.WireRevision, frames.WireRevision},
	} {
		if c.got != c.want {
			return &ProtocolError{Operation: identityOperation, Field: c.field, Detail: fmt.Sprintf("%q, expected %q", c.got, c.want)}
		}
	}
	return nil
}
