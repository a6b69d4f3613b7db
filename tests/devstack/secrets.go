package devstack

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
)

// randomHex returns 2n hex characters from n random bytes.
func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b) // crypto/rand.Read never fails on supported platforms
	return hex.EncodeToString(b)
}

// newProviderKey is a 32-character key, the length the simulator (like CaptchaAI) accepts.
func newProviderKey() string { return randomHex(16) }

// newCallbackSecret is 256 random bits.
func newCallbackSecret() string { return randomHex(32) }

// newNotifySecret is a Standard Webhooks secret: "whsec_" and base64 of 256 random bits, which is also the form
// a receiver's library expects.
func newNotifySecret() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	return "whsec_" + base64.StdEncoding.EncodeToString(b)
}
