package providers

import (
	"github.com/captchaflow/captchaflow/providers/callback"

	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/captchaflow/captchaflow"
)

// docHosts are each flavor's own documentation: a table entry cites its provider, never a third party.
var docHosts = map[Flavor][]string{
	callback.AntiCaptcha: {"https://anti-captcha.com/apidoc"},
	callback.TwoCaptcha:  {"https://2captcha.com/api-docs/"},
	callback.CapMonster:  {"https://capmonster.atlassian.net/", "https://docs.capmonster.cloud/"},
	callback.CapSolver:   {"https://docs.capsolver.com/"},
}

func TestEveryEntryCitesItsProvidersDocs(t *testing.T) {
	for kind, byFlavor := range taskTable {
		for flavor, spec := range byFlavor {
			ok := slices.ContainsFunc(docHosts[flavor], func(h string) bool { return strings.HasPrefix(spec.Doc, h) })
			assert.True(t, ok, "%s/%s cites %q", flavor, kind, spec.Doc)
			assert.NotEmpty(t, spec.Type)
		}
	}
}

// The in.php params the workflow already requires (captchaflow.RequiredParams) are the ones every task requires:
// an Input that validates never reaches a provider without a field its task needs, and no task needs a field the
// Input may lack.
func TestRequiredFieldsMatchTheInputsRequiredParams(t *testing.T) {
	for method, required := range captchaflow.RequiredParams {
		for _, kind := range kindsOf(method) {
			for flavor, spec := range taskTable[kind] {
				var specRequired []string
				for _, f := range spec.Fields {
					if f.Required && f.Default == "" && !(kind == KindImage && f.Param != required[0]) {
						specRequired = append(specRequired, f.Param)
					}
				}
				assert.ElementsMatch(t, required, specRequired, "%s/%s for method %s", flavor, kind, method)
			}
		}
	}
}

// kindsOf lists the kinds a method yields.
func kindsOf(method string) []Kind {
	if method != methodRecaptcha {
		k, err := KindOf(method, nil)
		if err != nil {
			return nil
		}
		return []Kind{k}
	}
	return []Kind{KindRecaptchaV2, KindRecaptchaV2Enterprise, KindRecaptchaV3, KindRecaptchaV3Enterprise}
}

func TestEveryKnownMethodHasAKind(t *testing.T) {
	for method := range captchaflow.RequiredParams {
		assert.NotEmpty(t, kindsOf(method), method)
	}
	assert.Len(t, Kinds, len(taskTable), "every kind is declared in the table, served by some flavor")
}

func TestDefaultsEncode(t *testing.T) {
	for kind, byFlavor := range taskTable {
		for flavor, spec := range byFlavor {
			for _, f := range spec.Fields {
				if f.Default != "" {
					_, err := f.Enc.encode(f.Default)
					assert.NoError(t, err, "%s/%s %s", flavor, kind, f.Param)
				}
			}
		}
	}
}

func TestProfilesAreComplete(t *testing.T) {
	for _, f := range Flavors {
		p, ok := ProfileOf(f)
		assert.True(t, ok, f)
		assert.Equal(t, f, p.Flavor)
		assert.True(t, strings.HasPrefix(p.BaseURL, "https://api."), p.BaseURL)
		assert.NotEmpty(t, p.Reports)
	}
}
