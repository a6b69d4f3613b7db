package providers

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/captchaflow/captchaflow"
	"github.com/captchaflow/captchaflow/providers/callback"
)

// Field fills one task field from one in.php param.
type Field struct {
	Param    string // the in.php param
	Path     string // the task field; a dot nests it in an object ("metadata.action")
	Enc      encoding
	Required bool   // the task cannot do without it (a path several params fill is required if any says so)
	Default  string // fills the field when no param does (in.php form, encoded like the param)
	Proxied  bool   // only the proxied type has it
}

// TaskSpec is one flavor's task for one kind.
type TaskSpec struct {
	Type     string
	Proxied  string // the type that takes params.proxy (Type itself where one type takes both; "": none)
	Fields   []Field
	Const    map[string]any // fixed task fields
	Solution callback.Solution
	Doc      string
}

// The in.php params every token task shares.
var (
	pageURL      = reqField("pageurl", "websiteURL")
	googleKey    = reqField("googlekey", "websiteKey")
	siteKey      = reqField("sitekey", "websiteKey")
	invisible    = field("invisible", "isInvisible", encBool)
	dataS        = strField("data-s", "recaptchaDataSValue")
	enterpriseS  = strField("data-s", "enterprisePayload.s")
	pageAction   = strField("action", "pageAction")
	imageBody    = Field{Param: "body", Path: "body", Enc: encImage, Required: true}
	imageFile    = Field{Param: "file", Path: "body", Enc: encImage, Required: true}
	funPublicKey = reqField("publickey", "websitePublicKey")
	funSubdomain = field("surl", "funcaptchaApiJSSubdomain", encHost)
	funBlob      = field("data[blob]", "data", encBlob)
	// Anti-Captcha and 2captcha require minScore: 0.3 is the queue "most of our available workers" are in.
	minScore      = Field{Param: "min_score", Path: "minScore", Enc: encFloat, Required: true, Default: "0.3"}
	v3Fields      = []Field{pageURL, googleKey, minScore, pageAction}
	imageFields   = []Field{imageBody, imageFile}
	userAgent     = strField("userAgent", "userAgent")
	cookies       = field("cookies", "cookies", encCookies) // in.php's KEY:Value;… as KEY=Value; …
	requiredUA    = reqField("userAgent", "userAgent")
	captchaURL    = reqField("captcha_url", "captchaUrl")
	awsFields     = []Field{pageURL, siteKey, reqField("iv", "iv"), reqField("context", "context")}
	antiTurnstile = antiProxied("TurnstileTaskProxyless", pageURL, siteKey, strField("action", "action"), strField("data", "cData"),
		strField("pagedata", "chlPageData"))
	// The same, where only the flavor's proxied type documents them.
	proxiedUA, proxiedCookies = Field{Param: "userAgent", Path: "userAgent", Enc: encString, Proxied: true},
		Field{Param: "cookies", Path: "cookies", Enc: encCookies, Proxied: true}
)

func field(param, path string, enc encoding) Field { return Field{Param: param, Path: path, Enc: enc} }
func strField(param, path string) Field            { return field(param, path, encString) }
func reqField(param, path string) Field {
	return Field{Param: param, Path: path, Enc: encString, Required: true}
}

// anti is an Anti-Captcha task, documented on the page named after its type; proxied, its type without "Proxyless".
func anti(typ string, f ...Field) TaskSpec { return TaskSpec{Type: typ, Fields: f, Doc: antiDoc + typ} }

func antiProxied(typ string, f ...Field) TaskSpec {
	s := anti(typ, f...)
	s.Proxied = strings.TrimSuffix(typ, "Proxyless")
	return s
}

const antiDoc = "https://anti-captcha.com/apidoc/task-types/"

// taskTable maps in.php to each flavor's createTask task (as its Doc page shows); what it lacks is ErrUnsupported.
var taskTable = map[Kind]map[Flavor]TaskSpec{
	KindRecaptchaV2: {
		callback.AntiCaptcha: antiProxied("RecaptchaV2TaskProxyless", pageURL, googleKey, dataS, invisible, proxiedUA, proxiedCookies),
		callback.TwoCaptcha: {Type: "RecaptchaV2TaskProxyless", Proxied: "RecaptchaV2Task", Doc: "https://2captcha.com/api-docs/recaptcha-v2",
			Fields: []Field{pageURL, googleKey, dataS, invisible, userAgent, cookies}},
		// Proxied: docs.capmonster.cloud's one RecaptchaV2Task whose proxy fields are optional.
		callback.CapMonster: {Type: "NoCaptchaTaskProxyless", Proxied: "RecaptchaV2Task", Fields: []Field{pageURL, googleKey, proxiedUA, proxiedCookies},
			Doc: "https://capmonster.atlassian.net/wiki/plugins/viewsource/viewpagesrc.action?pageId=425989"},
		// ReCaptchaV2Task and the proxy fields: https://docs.capsolver.com/guide/api-use-params (format 1).
		callback.CapSolver: {Type: "ReCaptchaV2TaskProxyLess", Proxied: "ReCaptchaV2Task", Fields: []Field{pageURL, googleKey, dataS, invisible},
			Doc: "https://docs.capsolver.com/zh/guide/captcha/ReCaptchaV2"},
	},
	KindRecaptchaV2Enterprise: {
		callback.AntiCaptcha: {Type: "RecaptchaV2EnterpriseTaskProxyless", Proxied: "RecaptchaV2EnterpriseTask",
			Fields: []Field{pageURL, googleKey}, Doc: "https://anti-captcha.com/apidoc"},
		callback.CapSolver: {Type: "ReCaptchaV2EnterpriseTaskProxyLess", Proxied: "ReCaptchaV2EnterpriseTask", Fields: []Field{pageURL, googleKey, enterpriseS, invisible},
			Doc: "https://docs.capsolver.com/zh/guide/captcha/ReCaptchaV2"},
	},
	KindRecaptchaV3: {
		callback.AntiCaptcha: anti("RecaptchaV3TaskProxyless", v3Fields...),
		callback.TwoCaptcha:  {Type: "RecaptchaV3TaskProxyless", Fields: v3Fields, Doc: "https://2captcha.com/api-docs/recaptcha-v3"},
		callback.CapSolver: {Type: "ReCaptchaV3TaskProxyLess", Fields: []Field{pageURL, googleKey, pageAction},
			Doc: "https://docs.capsolver.com/en/guide/captcha/ReCaptchaV3/"},
	},
	KindRecaptchaV3Enterprise: {
		callback.TwoCaptcha: {Type: "RecaptchaV3TaskProxyless", Fields: v3Fields,
			Const: map[string]any{"isEnterprise": true}, Doc: "https://2captcha.com/api-docs/recaptcha-v3"},
		callback.CapSolver: {Type: "ReCaptchaV3EnterpriseTaskProxyLess", Fields: []Field{pageURL, googleKey, pageAction, enterpriseS},
			Doc: "https://docs.capsolver.com/en/guide/captcha/ReCaptchaV3/"},
	},
	KindHCaptcha: {callback.TwoCaptcha: {Type: "HCaptchaTaskProxyless", Fields: []Field{pageURL, siteKey},
		Doc: "https://2captcha.com/api-docs/create-task"}},
	KindTurnstile: {
		callback.AntiCaptcha: antiTurnstile,
		callback.CapSolver: {Type: "AntiTurnstileTaskProxyLess", Fields: []Field{pageURL, siteKey, strField("action", "metadata.action"),
			strField("data", "metadata.cdata")}, Doc: "https://docs.capsolver.com/guide/captcha/cloudflare_turnstile"},
		callback.CapMonster: {Type: "TurnstileTask", Proxied: "TurnstileTask", Fields: []Field{pageURL, siteKey},
			Doc: "https://docs.capmonster.cloud/docs/captchas/tunrstile-task"},
	},
	KindTurnstileChallenge: {
		callback.AntiCaptcha: antiTurnstile, // the solution's userAgent goes with the token
		callback.TwoCaptcha: {Type: "TurnstileTaskProxyless", Proxied: "TurnstileTask", Doc: "https://2captcha.com/api-docs/cloudflare-turnstile",
			Fields: []Field{pageURL, siteKey, strField("action", "action"), strField("data", "data"), strField("pagedata", "pagedata"), userAgent}},
		callback.CapMonster: {Type: "TurnstileTask", Proxied: "TurnstileTask", Const: map[string]any{"cloudflareTaskType": "token"},
			Fields: []Field{pageURL, siteKey, strField("action", "pageAction"), strField("data", "data"), strField("pagedata", "pageData"), userAgent},
			Doc:    "https://docs.capmonster.cloud/docs/captchas/tunrstile-task"},
	},
	// The cf_clearance cookie of a challenge page, through the user's proxy only (no in.php method: "cf_clearance").
	KindCFClearance: {
		// CapMonster requires websiteKey, htmlPageBase64 and userAgent, the other flavor none: it refuses a task without them.
		callback.CapMonster: {Proxied: "TurnstileTask", Const: map[string]any{"cloudflareTaskType": "cf_clearance"}, Fields: []Field{pageURL,
			strField("sitekey", "websiteKey"), field("html", "htmlPageBase64", encBase64), userAgent},
			Doc: "https://docs.capmonster.cloud/docs/captchas/tunrstile-task"},
		callback.CapSolver: {Proxied: "AntiCloudflareTask", Fields: []Field{pageURL, userAgent, strField("html", "html")},
			Doc: "https://docs.capsolver.com/guide/captcha/cloudflare_challenge"},
	},
	KindDataDome: { // Anti-Captcha sells none
		callback.TwoCaptcha: {Proxied: "DataDomeSliderTask", Fields: []Field{pageURL, captchaURL, requiredUA},
			Doc: "https://2captcha.com/api-docs/datadome-slider-captcha"},
		callback.CapMonster: {Proxied: "CustomTask", Const: map[string]any{"class": "DataDome"}, Fields: []Field{pageURL, requiredUA,
			reqField("captcha_url", "metadata.captchaUrl"), field("cookies", "metadata.datadomeCookie", encCookies)},
			Doc: "https://docs.capmonster.cloud/docs/captchas/datadome"},
		callback.CapSolver: {Proxied: "DatadomeSliderTask", Fields: []Field{pageURL, captchaURL, requiredUA},
			Doc: "https://docs.capsolver.com/guide/captcha/datadome"},
	},
	// 2captcha's AmazonTask answers a captcha_voucher, not the aws-waf-token cookie the others answer: not taken.
	KindAmazonWAF: {
		callback.CapMonster: {Type: "AmazonTask", Proxied: "AmazonTask", Const: map[string]any{"cookieSolution": true}, Fields: append(awsFields,
			strField("captcha_script", "captchaScript"), strField("challenge_script", "challengeScript")), Doc: "https://docs.capmonster.cloud/docs/captchas/amazon-task"},
		callback.CapSolver: {Type: "AntiAwsWafTaskProxyLess", Proxied: "AntiAwsWafTask", Fields: []Field{pageURL, reqField("sitekey", "awsKey"),
			reqField("iv", "awsIv"), reqField("context", "awsContext"), strField("challenge_script", "awsChallengeJS")},
			Doc: "https://docs.capsolver.com/guide/captcha/awsWaf"},
	},
	KindMTCaptcha: {callback.CapSolver: {Type: "MtCaptchaTaskProxyLess", Proxied: "MtCaptchaTask", Fields: []Field{pageURL, siteKey},
		Doc: "https://docs.capsolver.com/guide/captcha/MtCaptcha"}},
	KindFriendlyCaptcha: {callback.AntiCaptcha: antiProxied("FriendlyCaptchaTaskProxyless", pageURL, siteKey)},
	KindFunCaptcha: {
		callback.AntiCaptcha: antiProxied("FunCaptchaTaskProxyless", pageURL, funPublicKey, funSubdomain, funBlob),
		callback.CapSolver: {Type: "FunCaptchaTaskProxyLess", Fields: []Field{pageURL, funPublicKey, funSubdomain, funBlob},
			Doc: "https://docs.capsolver.com/guide/captcha/FunCaptcha"},
	},
	KindGeeTest3: {callback.AntiCaptcha: antiProxied("GeeTestTaskProxyless", pageURL, reqField("gt", "gt"), reqField("challenge", "challenge"),
		field("api_server", "geetestApiServerSubdomain", encHost))},
	KindGeeTest4: {callback.AntiCaptcha: {Type: "GeeTestTaskProxyless", Proxied: "GeeTestTask", Fields: []Field{pageURL, reqField("captcha_id", "gt")},
		Const: map[string]any{"version": 4}, Doc: antiDoc + "GeeTestTaskProxyless"}},
	KindImage: {
		callback.AntiCaptcha: anti("ImageToTextTask", imageBody, imageFile, field("phrase", "phrase", encBool), field("regsense", "case", encBool),
			field("numeric", "numeric", encInt), field("calc", "math", encBool), field("min_len", "minLength", encInt),
			field("max_len", "maxLength", encInt), strField("textinstructions", "comment")),
		callback.CapMonster: {Type: "ImageToTextTask", Fields: imageFields,
			Doc: "https://capmonster.atlassian.net/wiki/plugins/viewsource/viewpagesrc.action?pageId=425989"},
		callback.CapSolver: {Type: "ImageToTextTask", Fields: imageFields, Doc: "https://docs.capsolver.com/zh/guide/api-createtask"},
	},
}

// solutions: where a kind's code is, the same for every flavor.
var solutions = map[Kind]callback.Solution{
	KindRecaptchaV2: callback.RecaptchaToken, KindRecaptchaV2Enterprise: callback.RecaptchaToken,
	KindRecaptchaV3: callback.RecaptchaToken, KindRecaptchaV3Enterprise: callback.RecaptchaToken,
	// The solution field is not on the page read; 2captcha's token answers carry gRecaptchaResponse or token.
	KindHCaptcha:  callback.AnyToken,
	KindTurnstile: callback.PlainToken, KindFunCaptcha: callback.PlainToken, KindTurnstileChallenge: callback.TokenAndAgent,
	KindCFClearance: callback.CFClearance, KindDataDome: callback.DataDome, KindAmazonWAF: callback.AWSWAF,
	KindMTCaptcha: callback.PlainToken, KindFriendlyCaptcha: callback.TokenAndAgent, // Anti-Captcha: "Use it when you submit"
	KindGeeTest3: callback.GeeTest3, KindGeeTest4: callback.GeeTest4, KindImage: callback.ImageText,
}

// bareCodes are the kinds whose in.php code never holds "|", res.php's ids= separator: only theirs share a request
// (a FunCaptcha token holds several "|"; an image's text, GeeTest's object, an unlisted method's answer may hold any).
var bareCodes = append(slices.Clone(recaptchaKinds), KindHCaptcha, KindTurnstile)

// AnswersMore is the kind of the method with params when its answer holds more than its code (a user agent,
// cookies): the workflow takes it from a result request of its own, never a callback or a batch. Else "".
func AnswersMore(method string, params map[string]string) Kind {
	if kind, err := KindOf(method, params); err == nil && kind.AnswersMore() {
		return kind
	}
	return ""
}

// AnswersMore tells whether the kind's answer holds more than its code.
func (k Kind) AnswersMore() bool { return solutions[k].More }

// TaskFor is the flavor's task for kind, or false when the flavor does not serve it.
func TaskFor(f Flavor, kind Kind) (TaskSpec, bool) {
	spec, ok := taskTable[kind][f]
	spec.Solution = solutions[kind]
	return spec, ok
}

// Supports reports whether the flavor can serve the in.php method with its params, and if not, why.
func Supports(f Flavor, method string, params map[string]string) error {
	_, _, err := buildTask(f, method, params)
	return err
}

// Kind is what a task asks the provider to solve, derived from the in.php method and its selector params (KindOf).
type Kind string

// The known kinds, one per in.php method (named after it) or reCAPTCHA variant.
const (
	KindRecaptchaV2           Kind = "recaptcha_v2"
	KindRecaptchaV2Enterprise Kind = KindRecaptchaV2 + enterpriseSuffix
	KindRecaptchaV3           Kind = "recaptcha_v3"
	KindRecaptchaV3Enterprise Kind = KindRecaptchaV3 + enterpriseSuffix
	KindHCaptcha              Kind = "hcaptcha"
	KindTurnstile             Kind = "turnstile"
	KindFunCaptcha            Kind = "funcaptcha"
	KindGeeTest3              Kind = "geetest"
	KindGeeTest4              Kind = "geetest_v4"
	KindImage                 Kind = "image"
	KindTurnstileChallenge    Kind = "turnstile_challenge" // method turnstile with params.pagedata: a Cloudflare challenge page
	KindCFClearance           Kind = "cf_clearance"
	KindDataDome              Kind = "datadome"
	KindAmazonWAF             Kind = "amazon_waf"
	KindMTCaptcha             Kind = "mt_captcha"
	KindFriendlyCaptcha       Kind = "friendly_captcha"
	enterpriseSuffix               = "_enterprise"
	methodRecaptcha                = "userrecaptcha" // the in.php method whose params version and enterprise pick the kind
)

var Kinds = slices.Sorted(maps.Keys(taskTable))

// KindOf is the kind of an in.php method with its params. A method the table does not know is ErrUnsupported.
func KindOf(method string, params map[string]string) (Kind, error) {
	switch Kind(method) {
	case "base64", "post":
		return KindImage, nil
	case KindTurnstile:
		return map[bool]Kind{false: KindTurnstile, true: KindTurnstileChallenge}[strings.TrimSpace(params["pagedata"]) != ""], nil
	case KindHCaptcha, KindFunCaptcha, KindGeeTest3, KindGeeTest4, KindCFClearance, KindDataDome, KindAmazonWAF,
		KindMTCaptcha, KindFriendlyCaptcha:
		return Kind(method), nil
	case methodRecaptcha:
	default:
		return "", unsupported("no createTask task is declared for method %.40q", method)
	}
	v := strings.ToLower(strings.TrimSpace(params["version"]))
	kind := map[string]Kind{"": KindRecaptchaV2, "v2": KindRecaptchaV2, "v3": KindRecaptchaV3}[v]
	switch enterprise, err := flag(params["enterprise"]); {
	case err != nil:
		return "", fmt.Errorf("params.enterprise: %w", err)
	case kind == "":
		return "", unsupported("version %.10q is neither v2 nor v3", v)
	case enterprise:
		kind += enterpriseSuffix
	}
	return kind, nil
}

// Methods are the in.php methods a createTask flavor serves (a kind in its table), sorted.
func Methods(f Flavor) (out []string) {
	for _, kind := range Kinds {
		switch _, ok := taskTable[kind][f]; {
		case !ok:
		case kind == KindImage:
			out = append(out, "base64", "post")
		case strings.HasPrefix(string(kind), "recaptcha"):
			out = append(out, methodRecaptcha)
		case kind == KindTurnstileChallenge:
			out = append(out, string(KindTurnstile))
		default:
			out = append(out, string(kind))
		}
	}
	return slices.Compact(slices.Sorted(slices.Values(out)))
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

// ErrUnsupported marks a task a flavor's table has no entry for: never sent to that provider.
var ErrUnsupported = errors.New("not supported by this provider")

func unsupported(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrUnsupported}, args...)...)
}

// buildTask maps an in.php method and params to the flavor's task; no error echoes a value (a token, an image).
func buildTask(f Flavor, method string, params map[string]string) (map[string]any, TaskSpec, error) {
	kind, err := KindOf(method, params)
	if err != nil {
		return nil, TaskSpec{}, fmt.Errorf("%s: %w", f, err)
	}
	spec, ok := TaskFor(f, kind)
	if !ok {
		return nil, TaskSpec{}, unsupported("%s has no task for method %s (%s)", f, method, kind)
	}
	task, err := spec.fill(method, params)
	if err == nil && params["proxy"] != "" {
		err = proxyFields(task, profiles[f], params)
	}
	if err != nil {
		return nil, TaskSpec{}, fmt.Errorf("%s, method %s (%s): %w", f, method, kind, err)
	}
	return task, spec, nil
}

// fill builds the task: constants, one field per param (sorted, so errors are stable), defaults, the required check.
func (s TaskSpec) fill(method string, params map[string]string) (map[string]any, error) {
	task, proxied := map[string]any{"type": s.Type}, params["proxy"] != ""
	if proxied && s.Proxied == "" { // never sent proxyless: the user's IP and browser are the point
		return nil, unsupported("the provider has no proxied task of this kind")
	} else if !proxied && s.Type == "" { // as the provider would: ERROR_PROXY_MISSING is captchaflow's bug
		return nil, fmt.Errorf("params.proxy: required: the provider's task of this kind goes through the user's proxy only")
	} else if proxied {
		task["type"] = s.Proxied
	}
	for _, k := range slices.Sorted(maps.Keys(s.Const)) {
		setPath(task, k, s.Const[k])
	}
	filledBy := map[string]string{}
	for _, name := range slices.Sorted(maps.Keys(params)) {
		if method == methodRecaptcha && (name == "version" || name == "enterprise") || name == "proxy" || name == "proxytype" {
			continue // they picked the kind (KindOf), or proxyFields sends them; none is sent as is
		}
		i := slices.IndexFunc(s.Fields, func(f Field) bool { return f.Param == name && (proxied || !f.Proxied) })
		if i < 0 {
			return nil, unsupported("param %s: the provider's task has no field for it", name)
		}
		f := s.Fields[i]
		v, err := f.Enc.encode(params[name])
		if err != nil {
			return nil, fmt.Errorf("params.%s: %w", name, err)
		} else if v == nil {
			continue
		} else if other, dup := filledBy[f.Path]; dup {
			return nil, fmt.Errorf("params.%s and params.%s both fill the task's %s: pass one", other, name, f.Path)
		}
		filledBy[f.Path] = name
		setPath(task, f.Path, v)
	}
	for _, f := range s.Fields {
		if _, done := filledBy[f.Path]; !done && f.Default != "" {
			v, _ := f.Enc.encode(f.Default) // TestDefaultsEncode covers every default
			filledBy[f.Path] = f.Param
			setPath(task, f.Path, v)
		} else if !done && f.Required {
			return nil, fmt.Errorf("params.%s: required", f.Param)
		}
	}
	return task, nil
}

// proxyFields sends params.proxy and params.proxytype (Input.Validate checked them) as the flavor documents them.
func proxyFields(task map[string]any, p Profile, params map[string]string) error {
	proxy, err := captchaflow.ParseProxy(params["proxy"])
	typ, ok := p.ProxyTypes[strings.ToUpper(strings.TrimSpace(params["proxytype"]))]
	switch _, ipErr := netip.ParseAddr(proxy.Host); {
	case err != nil:
		return fmt.Errorf("params.proxy: %w", err)
	case !ok:
		return unsupported("proxytype %.10q: the provider takes no proxy of that type", params["proxytype"])
	case ipErr != nil && p.ProxyIPOnly: // no DNS here: the name might resolve elsewhere at the provider
		return unsupported("the provider takes a proxy by its IP address only, not a host name")
	}
	task["proxyType"], task["proxyAddress"], task["proxyPort"] = typ, proxy.Host, proxy.Port
	if proxy.Login != "" {
		task["proxyLogin"], task["proxyPassword"] = proxy.Login, proxy.Password
	}
	return nil
}

// setPath sets a dotted path ("metadata.action"), creating the objects on the way.
func setPath(obj map[string]any, path string, v any) {
	keys := strings.Split(path, ".")
	for _, k := range keys[:len(keys)-1] {
		if _, ok := obj[k].(map[string]any); !ok {
			obj[k] = map[string]any{}
		}
		obj = obj[k].(map[string]any)
	}
	obj[keys[len(keys)-1]] = v
}

// encoding turns an in.php param value into a task field value; nil leaves the field out, as does a blank value.
type encoding int

const (
	encString encoding = iota // as is
	encBool                   // flag's
	encInt
	encFloat
	encImage // re-encoded as createTask's "only clean base64!" (anti-captcha.com/apidoc/task-types/ImageToTextTask)
	encHost  // in.php's URL (surl, api_server) as the bare host the task field wants
	encBlob  // data[blob] as the stringified {"blob": …} object the task's data field wants
	encCookies
	encBase64 // the raw param as standard base64 (CapMonster's htmlPageBase64)
)

func (e encoding) encode(v string) (any, error) {
	if e != encString && e != encBlob && e != encImage {
		v = strings.TrimSpace(v)
	}
	switch {
	case e == encImage:
		img, err := decodeImage(v)
		return base64.StdEncoding.EncodeToString(img), err
	case v == "":
		return nil, nil
	case e == encBool:
		return flag(v)
	case e == encInt:
		if n, err := strconv.Atoi(v); err == nil {
			return n, nil
		}
		return nil, errors.New("must be an integer")
	case e == encFloat:
		if x, err := strconv.ParseFloat(v, 64); err == nil {
			return json.Number(strconv.FormatFloat(x, 'f', -1, 64)), nil
		}
		return nil, errors.New("must be a number")
	case e == encHost:
		if !strings.Contains(v, "://") {
			v = "https://" + v
		}
		if u, err := url.Parse(v); err == nil && u.Host != "" {
			return u.Host, nil
		}
		return nil, errors.New("must be a host name or URL")
	case e == encBlob:
		b, err := json.Marshal(map[string]string{"blob": v})
		return string(b), err
	case e == encCookies:
		return cookieHeader(v), nil
	case e == encBase64:
		return base64.StdEncoding.EncodeToString([]byte(v)), nil
	}
	return v, nil
}

// cookieHeader turns in.php's KEY1:Value1;KEY2:Value2 into createTask's "KEY1=Value1; KEY2=Value2" (pairs with "=" kept).
func cookieHeader(v string) string {
	pairs := strings.Split(v, ";")
	for i, p := range pairs {
		if p = strings.TrimSpace(p); !strings.Contains(p, "=") {
			p = strings.Replace(p, ":", "=", 1)
		}
		pairs[i] = p
	}
	return strings.Join(slices.DeleteFunc(pairs, func(p string) bool { return p == "" }), "; ")
}
