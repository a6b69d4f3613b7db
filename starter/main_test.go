package main

import (
	"bytes"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestRequiredFlags(t *testing.T) {
	var out, errOut bytes.Buffer
	assert.Equal(t, 2, run([]string{"--method", "turnstile"}, &out, &errOut))
	assert.Contains(t, errOut.String(), "--id and --method are required")
	errOut.Reset()
	assert.Equal(t, 2, run([]string{"--id", "x", "--method", "m", "--param", "novalue"}, &out, &errOut))
	assert.Contains(t, errOut.String(), "want key=value")
}

func TestWholeSecondsRoundsUp(t *testing.T) {
	assert.Equal(t, 0, wholeSeconds(0))
	assert.Equal(t, 1, wholeSeconds(10*time.Millisecond))
	assert.Equal(t, 120, wholeSeconds(2*time.Minute))
}
