package providers

import (
	"context"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/captchaflow/captchaflow/providers/callback"

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
			assert.NotEmpty(t, spec.Type+spec.Proxied)
		}
	}
}

// The in.php params the workflow already requires (captchaflow.RequiredParams) are the ones every task requires:
// an Input that validates never reaches a provider without a field its task needs, and no task needs a field the
// Input may lack.
func TestRequiredFieldsMatchTheInputsRequiredParams(t *testing.T) {
	for method, required := range knownMethods() {
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

// knownMethods are the methods the Input requires fields of (1.0's and the kinds added since), with those fields.
func knownMethods() map[string][]string {
	all := maps.Clone(captchaflow.RequiredParams)
	maps.Copy(all, captchaflow.KindParams)
	return all
}

func TestEveryKnownMethodHasAKind(t *testing.T) {
	for method := range knownMethods() {
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

// One list says what the caller may not pass (captchaflow.ReservedParams): the input validation refuses it, the
// in.php client refuses it, and no createTask table reads it; every param a table reads passes the validation.
func TestReservedParamsTheInputAndTheTablesAgree(t *testing.T) {
	params := captchaflow.Params{"googlekey": "k", "pageurl": "https://site.example/"}
	for kind, byFlavor := range taskTable {
		for flavor, spec := range byFlavor {
			for _, f := range spec.Fields {
				assert.NotContains(t, captchaflow.ReservedParams, f.Param, "%s/%s reads a reserved param", flavor, kind)
				if _, ok := params[f.Param]; !ok {
					params[f.Param] = "1"
				}
			}
		}
	}
	in := captchaflow.Input{Method: "userrecaptcha", Params: params}.WithDefaults()
	assert.NoError(t, in.Validate(), "every param a table reads is accepted")
	for _, name := range captchaflow.ReservedParams {
		in.Params = captchaflow.Params{"googlekey": "k", "pageurl": "https://site.example/", name: "x"}
		assert.ErrorContains(t, in.Validate(), "params."+name, name)
		_, _, err := encodeSubmit(testKey, "userrecaptcha", in.Params, "https://cb.example/")
		assert.Error(t, err, "the in.php client refuses %s too", name)
	}
}

// A reCAPTCHA v3 or Turnstile task's action passes the input validation and reaches the provider: in.php's form
// carries it as action (2captcha's in.php takes it so; its own form has no other action), createTask's task as the
// field the flavor's page names.
func TestActionReachesTheProvider(t *testing.T) {
	v3 := captchaflow.Input{Method: "userrecaptcha", Params: captchaflow.Params{"googlekey": "k", "pageurl": "https://site.example/",
		"version": "v3", "action": "login"}}
	turnstile := captchaflow.Input{Method: "turnstile", Params: captchaflow.Params{"sitekey": "0x4A", "pageurl": "https://site.example/",
		"action": "login"}}
	for _, in := range []captchaflow.Input{v3, turnstile} {
		require.NoError(t, in.WithDefaults().Validate(), in.Method)
		p := newFakeProvider(t, always(200, `{"status":1,"request":"1"}`))
		_, _, err := p.client(t).Submit(context.Background(), in.Method, in.Params, "https://cb.example/")
		require.NoError(t, err)
		assert.Equal(t, "login", p.lastRequest(t).PostForm.Get("action"), "in.php, %s", in.Method)
	}
	for _, c := range []struct {
		flavor Flavor
		in     captchaflow.Input
		want   string
	}{
		{callback.AntiCaptcha, v3, `"pageAction":"login"`}, {callback.TwoCaptcha, v3, `"pageAction":"login"`},
		{callback.CapSolver, v3, `"pageAction":"login"`}, {callback.AntiCaptcha, turnstile, `"action":"login"`},
		{callback.CapSolver, turnstile, `"metadata":{"action":"login"}`},
	} {
		p := newFake(t, ctAlways(200, `{"errorId":0,"taskId":1}`))
		_, _, err := p.client(t, c.flavor).Submit(context.Background(), c.in.Method, c.in.Params, "")
		require.NoError(t, err, c.flavor)
		assert.Contains(t, string(p.last(t).body["task"]), c.want, "%s %s", c.flavor, c.in.Method)
	}
}
