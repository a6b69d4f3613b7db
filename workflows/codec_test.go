package workflows

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/stretchr/testify/suite"
	"go.temporal.io/sdk/client"

	"github.com/captchaflow/captchaflow/codec"
)

// EncryptedSolveCaptchaSuite is every SolveCaptchaSuite test with the codec on, as a worker with
// CAPTCHAFLOW_KEYS_FILE runs them: inputs, results, signals and failures all encrypted.
type EncryptedSolveCaptchaSuite struct{ SolveCaptchaSuite }

func (s *EncryptedSolveCaptchaSuite) SetupTest() {
	s.SolveCaptchaSuite.SetupTest()
	path := filepath.Join(s.T().TempDir(), "keys")
	require.NoError(s.T(), os.WriteFile(path, []byte(codec.NewKeyLine("k1")), 0o600))
	var opts client.Options
	_, err := codec.Configure(&opts, path, nil)
	require.NoError(s.T(), err)
	s.env.SetDataConverter(opts.DataConverter)
	s.env.SetFailureConverter(opts.FailureConverter)
}

func TestEncryptedSolveCaptcha(t *testing.T) { suite.Run(t, new(EncryptedSolveCaptchaSuite)) }
