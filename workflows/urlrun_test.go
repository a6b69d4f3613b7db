package workflows

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// Two reset runs of one chain made within the same 65 s have run IDs (UUIDv7, as the server makes them) whose first 8
// characters are the same millisecond-timestamp bits: their pingback URLs must still differ, or the later run takes
// the earlier one's discarded submission for its own (a status word counted, a paid code dropped as settled).
func TestURLRunTellsResetRunsApart(t *testing.T) {
	const chain = "01a242ff-06da-7247-b419-8148bdd1f6af"
	r1, r2 := "01a24300-1c3e-7a01-9f00-0b1c2d3e4f50", "01a24300-4d2a-7c11-8a3b-77e0f1d2c3b4" // 12 s apart
	assert.Equal(t, chain, urlRun(chain, chain), "the chain's own run names the chain alone (1.0's URL)")
	assert.NotEqual(t, urlRun(chain, r1), urlRun(chain, r2), "two reset runs of one chain")
	assert.LessOrEqual(t, len(urlRun(chain, r2)), 64, "the previous release's ingress takes run IDs up to 64 bytes")
}
