package providers

import "github.com/captchaflow/captchaflow/providers/callback"

// The one declared table from the in.php vocabulary to each flavor's createTask task: for each kind (kinds.go) and
// flavor, the task type, which in.php param fills which task field, and where the solution is. A kind with no entry
// for a flavor is not served by it (ErrUnsupported, never sent); so is a param with no field. An entry is here only
// when its type and fields were read in the provider's own documentation, whose page is its Doc; golden_test.go
// checks each against the request body that page shows.

// Field fills one task field from one in.php param.
type Field struct {
	Param string // the in.php param
	Path  string // the task field; a dot nests it in an object ("metadata.action")
	Enc   encoding
	// Required: the task cannot do without this field (a path several params fill is required if any says so).
	Required bool
	// Default fills the field when no param does (in.php form, encoded like the param).
	Default string
}

// TaskSpec is one flavor's task for one kind.
type TaskSpec struct {
	Type     string
	Fields   []Field
	Const    map[string]any // fixed task fields
	Solution callback.Solution
	Doc      string
}

// The in.php params every token task shares.
var (
	pageURL      = Field{Param: "pageurl", Path: "websiteURL", Enc: encString, Required: true}
	googleKey    = Field{Param: "googlekey", Path: "websiteKey", Enc: encString, Required: true}
	siteKey      = Field{Param: "sitekey", Path: "websiteKey", Enc: encString, Required: true}
	invisible    = Field{Param: "invisible", Path: "isInvisible", Enc: encBool}
	dataS        = Field{Param: "data-s", Path: "recaptchaDataSValue", Enc: encString}
	enterpriseS  = Field{Param: "data-s", Path: "enterprisePayload.s", Enc: encString}
	pageAction   = Field{Param: "action", Path: "pageAction", Enc: encString}
	imageBody    = Field{Param: "body", Path: "body", Enc: encImage, Required: true}
	imageFile    = Field{Param: "file", Path: "body", Enc: encImage, Required: true}
	funPublicKey = Field{Param: "publickey", Path: "websitePublicKey", Enc: encString, Required: true}
	funSubdomain = Field{Param: "surl", Path: "funcaptchaApiJSSubdomain", Enc: encHost}
	funBlob      = Field{Param: "data[blob]", Path: "data", Enc: encBlob}
	// minScore is required by Anti-Captcha and 2captcha; in.php leaves it optional, so it defaults to 0.3, the
	// queue "most of our available workers" are in (https://anti-captcha.com/apidoc/task-types/RecaptchaV3TaskProxyless).
	minScore = Field{Param: "min_score", Path: "minScore", Enc: encFloat, Required: true, Default: "0.3"}
)

// taskTable is the declared mapping.
var taskTable = map[Kind]map[Flavor]TaskSpec{
	KindRecaptchaV2: {
		callback.AntiCaptcha: {Type: "RecaptchaV2TaskProxyless", Fields: []Field{pageURL, googleKey, dataS, invisible},
			Solution: callback.RecaptchaToken, Doc: "https://anti-captcha.com/apidoc/task-types/RecaptchaV2TaskProxyless"},
		callback.CapMonster: {Type: "NoCaptchaTaskProxyless", Fields: []Field{pageURL, googleKey},
			Solution: callback.RecaptchaToken, Doc: "https://capmonster.atlassian.net/wiki/plugins/viewsource/viewpagesrc.action?pageId=425989"},
		callback.CapSolver: {Type: "ReCaptchaV2TaskProxyLess", Fields: []Field{pageURL, googleKey, dataS, invisible},
			Solution: callback.RecaptchaToken, Doc: "https://docs.capsolver.com/zh/guide/captcha/ReCaptchaV2"},
	},
	KindRecaptchaV2Enterprise: {
		callback.AntiCaptcha: {Type: "RecaptchaV2EnterpriseTaskProxyless", Fields: []Field{pageURL, googleKey},
			Solution: callback.RecaptchaToken, Doc: "https://anti-captcha.com/apidoc"},
		callback.CapSolver: {Type: "ReCaptchaV2EnterpriseTaskProxyLess", Fields: []Field{pageURL, googleKey, enterpriseS, invisible},
			Solution: callback.RecaptchaToken, Doc: "https://docs.capsolver.com/zh/guide/captcha/ReCaptchaV2"},
	},
	KindRecaptchaV3: {
		callback.AntiCaptcha: {Type: "RecaptchaV3TaskProxyless", Fields: []Field{pageURL, googleKey, minScore, pageAction},
			Solution: callback.RecaptchaToken, Doc: "https://anti-captcha.com/apidoc/task-types/RecaptchaV3TaskProxyless"},
		callback.TwoCaptcha: {Type: "RecaptchaV3TaskProxyless", Fields: []Field{pageURL, googleKey, minScore, pageAction},
			Solution: callback.RecaptchaToken, Doc: "https://2captcha.com/api-docs/recaptcha-v3"},
		callback.CapSolver: {Type: "ReCaptchaV3TaskProxyLess", Fields: []Field{pageURL, googleKey, pageAction},
			Solution: callback.RecaptchaToken, Doc: "https://docs.capsolver.com/en/guide/captcha/ReCaptchaV3/"},
	},
	KindRecaptchaV3Enterprise: {
		callback.TwoCaptcha: {Type: "RecaptchaV3TaskProxyless", Fields: []Field{pageURL, googleKey, minScore, pageAction},
			Const: map[string]any{"isEnterprise": true}, Solution: callback.RecaptchaToken, Doc: "https://2captcha.com/api-docs/recaptcha-v3"},
		callback.CapSolver: {Type: "ReCaptchaV3EnterpriseTaskProxyLess", Fields: []Field{pageURL, googleKey, pageAction, enterpriseS},
			Solution: callback.RecaptchaToken, Doc: "https://docs.capsolver.com/en/guide/captcha/ReCaptchaV3/"},
	},
	KindHCaptcha: {
		// The solution field is not on the page read; 2captcha's token answers carry gRecaptchaResponse or token.
		callback.TwoCaptcha: {Type: "HCaptchaTaskProxyless", Fields: []Field{pageURL, siteKey},
			Solution: callback.AnyToken, Doc: "https://2captcha.com/api-docs/create-task"},
	},
	KindTurnstile: {
		callback.AntiCaptcha: {Type: "TurnstileTaskProxyless", Fields: []Field{pageURL, siteKey,
			{Param: "action", Path: "action", Enc: encString}, {Param: "data", Path: "cData", Enc: encString},
			{Param: "pagedata", Path: "chlPageData", Enc: encString}},
			Solution: callback.PlainToken, Doc: "https://anti-captcha.com/apidoc/task-types/TurnstileTaskProxyless"},
		callback.CapSolver: {Type: "AntiTurnstileTaskProxyLess", Fields: []Field{pageURL, siteKey,
			{Param: "action", Path: "metadata.action", Enc: encString}, {Param: "data", Path: "metadata.cdata", Enc: encString}},
			Solution: callback.PlainToken, Doc: "https://docs.capsolver.com/guide/captcha/cloudflare_turnstile"},
	},
	KindFunCaptcha: {
		callback.AntiCaptcha: {Type: "FunCaptchaTaskProxyless", Fields: []Field{pageURL, funPublicKey, funSubdomain, funBlob},
			Solution: callback.PlainToken, Doc: "https://anti-captcha.com/apidoc/task-types/FunCaptchaTaskProxyless"},
		callback.CapSolver: {Type: "FunCaptchaTaskProxyLess", Fields: []Field{pageURL, funPublicKey, funSubdomain, funBlob},
			Solution: callback.PlainToken, Doc: "https://docs.capsolver.com/guide/captcha/FunCaptcha"},
	},
	KindGeeTest3: {
		callback.AntiCaptcha: {Type: "GeeTestTaskProxyless", Fields: []Field{pageURL,
			{Param: "gt", Path: "gt", Enc: encString, Required: true}, {Param: "challenge", Path: "challenge", Enc: encString, Required: true},
			{Param: "api_server", Path: "geetestApiServerSubdomain", Enc: encHost}},
			Solution: callback.GeeTest3, Doc: "https://anti-captcha.com/apidoc/task-types/GeeTestTaskProxyless"},
	},
	KindGeeTest4: {
		callback.AntiCaptcha: {Type: "GeeTestTaskProxyless", Fields: []Field{pageURL, {Param: "captcha_id", Path: "gt", Enc: encString, Required: true}},
			Const: map[string]any{"version": 4}, Solution: callback.GeeTest4, Doc: "https://anti-captcha.com/apidoc/task-types/GeeTestTaskProxyless"},
	},
	KindImage: {
		callback.AntiCaptcha: {Type: "ImageToTextTask", Fields: []Field{imageBody, imageFile,
			{Param: "phrase", Path: "phrase", Enc: encBool}, {Param: "regsense", Path: "case", Enc: encBool},
			{Param: "numeric", Path: "numeric", Enc: encInt}, {Param: "calc", Path: "math", Enc: encBool},
			{Param: "min_len", Path: "minLength", Enc: encInt}, {Param: "max_len", Path: "maxLength", Enc: encInt},
			{Param: "textinstructions", Path: "comment", Enc: encString}},
			Solution: callback.ImageText, Doc: "https://anti-captcha.com/apidoc/task-types/ImageToTextTask"},
		callback.CapMonster: {Type: "ImageToTextTask", Fields: []Field{imageBody, imageFile},
			Solution: callback.ImageText, Doc: "https://capmonster.atlassian.net/wiki/plugins/viewsource/viewpagesrc.action?pageId=425989"},
		callback.CapSolver: {Type: "ImageToTextTask", Fields: []Field{imageBody, imageFile},
			Solution: callback.ImageText, Doc: "https://docs.capsolver.com/zh/guide/api-createtask"},
	},
}

// TaskFor is the flavor's task for kind, or false when the flavor does not serve it.
func TaskFor(f Flavor, kind Kind) (TaskSpec, bool) {
	spec, ok := taskTable[kind][f]
	return spec, ok
}

// Supports reports whether the flavor can serve the in.php method with its params, and if not, why.
func Supports(f Flavor, method string, params map[string]string) error {
	_, _, err := buildTask(f, method, params)
	return err
}
