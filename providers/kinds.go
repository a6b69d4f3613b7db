package providers

import (
	"fmt"
	"strings"
)

// Kind is what a task asks the provider to solve. The Input keeps the in.php vocabulary (method + params); KindOf
// derives the kind from the method and its selector params (userrecaptcha's version and enterprise), and the task
// table (tasks.go) maps each kind to each flavor's createTask task.
type Kind string

// The known kinds, one per in.php method or reCAPTCHA variant.
const (
	KindRecaptchaV2           Kind = "recaptcha_v2"
	KindRecaptchaV2Enterprise Kind = "recaptcha_v2_enterprise"
	KindRecaptchaV3           Kind = "recaptcha_v3"
	KindRecaptchaV3Enterprise Kind = "recaptcha_v3_enterprise"
	KindHCaptcha              Kind = "hcaptcha"
	KindTurnstile             Kind = "turnstile"
	KindFunCaptcha            Kind = "funcaptcha"
	KindGeeTest3              Kind = "geetest"
	KindGeeTest4              Kind = "geetest_v4"
	KindImage                 Kind = "image"
)

// Kinds lists every kind in a fixed order (the order Get tries solution shapes in).
var Kinds = []Kind{
	KindRecaptchaV2, KindRecaptchaV2Enterprise, KindRecaptchaV3, KindRecaptchaV3Enterprise,
	KindHCaptcha, KindTurnstile, KindFunCaptcha, KindGeeTest3, KindGeeTest4, KindImage,
}

// methodKinds maps each in.php method that needs no selector to its kind.
var methodKinds = map[string]Kind{
	"hcaptcha":   KindHCaptcha,
	"turnstile":  KindTurnstile,
	"funcaptcha": KindFunCaptcha,
	"geetest":    KindGeeTest3,
	"geetest_v4": KindGeeTest4,
	"base64":     KindImage,
	"post":       KindImage,
}

// methodRecaptcha is the in.php reCAPTCHA method; its params version (v2 | v3) and enterprise (1) pick the kind.
const methodRecaptcha = "userrecaptcha"

// isSelector tells the in.php params that pick the kind rather than fill a task field: KindOf reads them, none is sent.
func isSelector(method, param string) bool {
	return method == methodRecaptcha && (param == "version" || param == "enterprise")
}

// KindOf is the kind of an in.php method with its params. A method the table does not know is ErrUnsupported.
func KindOf(method string, params map[string]string) (Kind, error) {
	if k, ok := methodKinds[method]; ok {
		return k, nil
	}
	if method != methodRecaptcha {
		return "", unsupported("no createTask task is declared for method %.40q", method)
	}
	enterprise, err := flag(params["enterprise"])
	if err != nil {
		return "", fmt.Errorf("params.enterprise: %w", err)
	}
	switch v := strings.ToLower(strings.TrimSpace(params["version"])); {
	case v == "" || v == "v2":
		return pick(enterprise, KindRecaptchaV2Enterprise, KindRecaptchaV2), nil
	case v == "v3":
		return pick(enterprise, KindRecaptchaV3Enterprise, KindRecaptchaV3), nil
	default:
		return "", unsupported("version %.10q is neither v2 nor v3", v)
	}
}

func pick(cond bool, yes, no Kind) Kind {
	if cond {
		return yes
	}
	return no
}

// flag reads an in.php boolean param: "", "0" or "false" is false, "1" or "true" is true.
func flag(v string) (bool, error) {
	switch strings.ToLower(strings.TrimSpace(v)) {
	case "", "0", "false":
		return false, nil
	case "1", "true":
		return true, nil
	}
	return false, fmt.Errorf("must be 0, 1, true or false, got %.10q", v)
}
