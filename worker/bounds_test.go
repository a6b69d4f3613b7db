package main

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/captchaflow/captchaflow"
	"github.com/captchaflow/captchaflow/providers"
)

// captchaai repeats the contract's bound on a code (it does not import the contract); the worker passes the
// contract's value anyway, and this keeps a client built without the option on the same bound.
func TestProviderCodeBoundIsTheContracts(t *testing.T) {
	assert.Equal(t, captchaflow.MaxCodeBytes, providers.DefaultMaxCodeBytes)
}
