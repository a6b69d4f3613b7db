package main

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestRequiredFlags(t *testing.T) {
	var out, errOut bytes.Buffer
	assert.Equal(t, 2, run([]string{"--method", "turnstile"}, &out, &errOut))
	assert.Contains(t, errOut.String(), "--id and --method are required")
	errOut.Reset()
	assert.Equal(t, 2, run([]string{"--id", "x", "--method", "m", "--param", "novalue"}, &out, &errOut))
	assert.Contains(t, errOut.String(), "want key=value")
	errOut.Reset()
	assert.Equal(t, 2, run([]string{"--id", "x", "--method", "m", "--via", "grpc"}, &out, &errOut))
	assert.Contains(t, errOut.String(), `--via must be client or nexus, got "grpc"`)
}

func TestInputFlagMustBeJSON(t *testing.T) {
	var out, errOut bytes.Buffer
	assert.Equal(t, 2, run([]string{"--id", "x", "--method", "turnstile", "--input", "deadline_seconds=5"}, &out, &errOut))
	assert.Contains(t, errOut.String(), "--input")
}

func TestReportFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"report", "--verdict", "bad"}, "--id and --verdict are required"},
		{[]string{"report", "--id", "order-42"}, "--id and --verdict are required"},
		{[]string{"report", "--id", "order-42", "--verdict", "refund"}, `verdict: must be "good" or "bad"`},
		{[]string{"report", "--id", "order 42", "--verdict", "good"}, "--id: workflow ID"},
		{[]string{"report", "--id", "order-42", "--verdict", "good", "--nope"}, "flag provided but not defined"},
	} {
		var out, errOut bytes.Buffer
		assert.Equal(t, 2, run(tc.args, &out, &errOut), tc.args)
		assert.Contains(t, errOut.String(), tc.want, tc.args)
		assert.Empty(t, out.String())
	}
}

func TestReportUsageNamesTheSubcommand(t *testing.T) {
	var out, errOut bytes.Buffer
	assert.Equal(t, 2, run([]string{"report", "-h"}, &out, &errOut))
	assert.Contains(t, errOut.String(), "starter report")
	assert.Contains(t, errOut.String(), "-verdict")
}
