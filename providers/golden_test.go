package providers

import (
	"github.com/captchaflow/captchaflow/providers/callback"

	"encoding/base64"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// pngB64 is a small PNG, base64: the providers' examples use a placeholder ("BASE64_BODY_HERE!") that is not an image.
var pngB64 = base64.StdEncoding.EncodeToString(append([]byte("\x89PNG\r\n\x1a\n"), make([]byte, 120)...))

// golden is one method mapping checked against the request body its flavor's documentation shows: the in.php input
// captchaflow receives, and the task object the doc page (Doc) gives for it. Where a page shows a full request
// example, the values are the example's; where it shows only the task-object table, they are placeholders in the
// documented fields.
type golden struct {
	flavor Flavor
	kind   Kind
	doc    string
	method string
	params map[string]string
	task   string
}

var goldens = []golden{
	// Anti-Captcha.
	{callback.AntiCaptcha, KindRecaptchaV2, "https://anti-captcha.com/apidoc/methods/createTask", "userrecaptcha",
		map[string]string{"googlekey": "6LfI9IsUAAAAAKuvopU0hfY8pWADfR_mogXokIIZ", "pageurl": "http://makeawebsitehub.com/recaptcha/test.php"},
		`{"type":"RecaptchaV2TaskProxyless","websiteURL":"http://makeawebsitehub.com/recaptcha/test.php","websiteKey":"6LfI9IsUAAAAAKuvopU0hfY8pWADfR_mogXokIIZ"}`},
	{callback.AntiCaptcha, KindRecaptchaV2, "https://anti-captcha.com/apidoc/task-types/RecaptchaV2TaskProxyless", "userrecaptcha",
		map[string]string{"googlekey": "KEY", "pageurl": "https://site.example/login", "data-s": "S-VALUE", "invisible": "1", "version": "v2"},
		`{"type":"RecaptchaV2TaskProxyless","websiteURL":"https://site.example/login","websiteKey":"KEY","recaptchaDataSValue":"S-VALUE","isInvisible":true}`},
	{callback.AntiCaptcha, KindRecaptchaV2Enterprise, "https://anti-captcha.com/apidoc", "userrecaptcha",
		map[string]string{"googlekey": "KEY", "pageurl": "https://site.example/", "enterprise": "1"},
		`{"type":"RecaptchaV2EnterpriseTaskProxyless","websiteURL":"https://site.example/","websiteKey":"KEY"}`},
	{callback.AntiCaptcha, KindRecaptchaV3, "https://anti-captcha.com/apidoc/task-types/RecaptchaV3TaskProxyless", "userrecaptcha",
		map[string]string{"googlekey": "KEY", "pageurl": "http://mywebsite.com/recaptcha/test.php", "version": "v3", "action": "link_page"},
		`{"type":"RecaptchaV3TaskProxyless","websiteURL":"http://mywebsite.com/recaptcha/test.php","websiteKey":"KEY","minScore":0.3,"pageAction":"link_page"}`},
	{callback.AntiCaptcha, KindTurnstileChallenge, "https://anti-captcha.com/apidoc/task-types/TurnstileTaskProxyless", "turnstile",
		map[string]string{"sitekey": "SITE_KEY", "pageurl": "https://website.com", "action": "some action", "data": "cdata_token", "pagedata": "chlpagedata_token"},
		`{"type":"TurnstileTaskProxyless","websiteURL":"https://website.com","websiteKey":"SITE_KEY","action":"some action","cData":"cdata_token","chlPageData":"chlpagedata_token"}`},
	{callback.AntiCaptcha, KindFunCaptcha, "https://anti-captcha.com/apidoc/task-types/FunCaptchaTaskProxyless", "funcaptcha",
		map[string]string{"publickey": "07070707-2000-0000-1111-888888888888", "pageurl": "https://website.com",
			"surl": "https://someservice-api.arkoselabs.com", "data[blob]": "HERE_COMES_THE_blob_VALUE"},
		`{"type":"FunCaptchaTaskProxyless","websiteURL":"https://website.com","websitePublicKey":"07070707-2000-0000-1111-888888888888","funcaptchaApiJSSubdomain":"someservice-api.arkoselabs.com","data":"{\"blob\":\"HERE_COMES_THE_blob_VALUE\"}"}`},
	{callback.AntiCaptcha, KindGeeTest3, "https://anti-captcha.com/apidoc/task-types/GeeTestTaskProxyless", "geetest",
		map[string]string{"gt": "CONSTANT_GT_KEY", "challenge": "VARIABLE_CHALLENGE_KEY", "pageurl": "https://address.com", "api_server": "custom-domain.geetest.com"},
		`{"type":"GeeTestTaskProxyless","websiteURL":"https://address.com","gt":"CONSTANT_GT_KEY","challenge":"VARIABLE_CHALLENGE_KEY","geetestApiServerSubdomain":"custom-domain.geetest.com"}`},
	{callback.AntiCaptcha, KindGeeTest4, "https://anti-captcha.com/apidoc/task-types/GeeTestTaskProxyless", "geetest_v4",
		map[string]string{"captcha_id": "CONSTANT_GT_KEY", "pageurl": "https://address.com"},
		`{"type":"GeeTestTaskProxyless","websiteURL":"https://address.com","gt":"CONSTANT_GT_KEY","version":4}`},
	{callback.AntiCaptcha, KindImage, "https://anti-captcha.com/apidoc/task-types/ImageToTextTask", "base64",
		map[string]string{"body": pngB64, "phrase": "0", "regsense": "1", "numeric": "0", "calc": "0", "min_len": "0", "max_len": "0", "textinstructions": "enter red text"},
		`{"type":"ImageToTextTask","body":"` + pngB64 + `","phrase":false,"case":true,"numeric":0,"math":false,"minLength":0,"maxLength":0,"comment":"enter red text"}`},
	{callback.AntiCaptcha, KindImage, "https://anti-captcha.com/apidoc/task-types/ImageToTextTask", "post",
		map[string]string{"file": "data:image/png;base64," + pngB64},
		`{"type":"ImageToTextTask","body":"` + pngB64 + `"}`},
	{callback.AntiCaptcha, KindFriendlyCaptcha, "https://anti-captcha.com/apidoc/task-types/FriendlyCaptchaTaskProxyless", "friendly_captcha",
		map[string]string{"sitekey": "FCMDESUD3M34857N", "pageurl": "https://website.com"},
		`{"type":"FriendlyCaptchaTaskProxyless","websiteURL":"https://website.com","websiteKey":"FCMDESUD3M34857N"}`},
	// Proxied: the type without "Proxyless" and the proxy fields; HTTPS is Anti-Captcha's "usual http/https proxy".
	{callback.AntiCaptcha, KindRecaptchaV2, "https://anti-captcha.com/apidoc/task-types/RecaptchaV2Task", "userrecaptcha",
		map[string]string{"googlekey": "KEY", "pageurl": "https://site.example/", "proxy": "login:pass@203.0.113.7:3128",
			"proxytype": "HTTPS", "userAgent": "Mozilla/5.0", "cookies": "a:1;b:2"},
		`{"type":"RecaptchaV2Task","websiteURL":"https://site.example/","websiteKey":"KEY","proxyType":"http","proxyAddress":"203.0.113.7",
		"proxyPort":3128,"proxyLogin":"login","proxyPassword":"pass","userAgent":"Mozilla/5.0","cookies":"a=1; b=2"}`},
	{callback.AntiCaptcha, KindTurnstile, "https://anti-captcha.com/apidoc/task-types/TurnstileTask", "turnstile",
		map[string]string{"sitekey": "SITE_KEY", "pageurl": "https://website.com", "proxy": "203.0.113.7:1080", "proxytype": "SOCKS5"},
		`{"type":"TurnstileTask","websiteURL":"https://website.com","websiteKey":"SITE_KEY","proxyType":"socks5","proxyAddress":"203.0.113.7","proxyPort":1080}`},
	// 2captcha API v2.
	{callback.TwoCaptcha, KindRecaptchaV2, "https://2captcha.com/api-docs/recaptcha-v2", "userrecaptcha",
		map[string]string{"googlekey": "6Le-wvkSAAAAAPBMRTvw0Q4Muexq9bi0DJwx_mJ-", "pageurl": "https://2captcha.com/demo/recaptcha-v2"},
		`{"type":"RecaptchaV2TaskProxyless","websiteURL":"https://2captcha.com/demo/recaptcha-v2","websiteKey":"6Le-wvkSAAAAAPBMRTvw0Q4Muexq9bi0DJwx_mJ-"}`},
	{callback.TwoCaptcha, KindRecaptchaV2, "https://2captcha.com/api-docs/recaptcha-v2", "userrecaptcha",
		map[string]string{"googlekey": "KEY", "pageurl": "https://2captcha.com/demo/recaptcha-v2", "proxy": "user:pw@proxy.example.com:8080",
			"proxytype": "HTTP", "userAgent": "Mozilla/5.0"},
		`{"type":"RecaptchaV2Task","websiteURL":"https://2captcha.com/demo/recaptcha-v2","websiteKey":"KEY","proxyType":"http",
		"proxyAddress":"proxy.example.com","proxyPort":8080,"proxyLogin":"user","proxyPassword":"pw","userAgent":"Mozilla/5.0"}`},
	{callback.TwoCaptcha, KindHCaptcha, "https://2captcha.com/api-docs/create-task", "hcaptcha",
		map[string]string{"sitekey": "f7de0da3-3303-44e8-ab48-fa32ff8ccc7b", "pageurl": "https://2captcha.com/demo/hcaptcha"},
		`{"type":"HCaptchaTaskProxyless","websiteURL":"https://2captcha.com/demo/hcaptcha","websiteKey":"f7de0da3-3303-44e8-ab48-fa32ff8ccc7b"}`},
	{callback.TwoCaptcha, KindRecaptchaV3, "https://2captcha.com/api-docs/recaptcha-v3", "userrecaptcha",
		map[string]string{"googlekey": "KEY", "pageurl": "https://2captcha.com/demo/recaptcha-v3", "version": "v3", "min_score": "0.9", "action": "myAction"},
		`{"type":"RecaptchaV3TaskProxyless","websiteURL":"https://2captcha.com/demo/recaptcha-v3","websiteKey":"KEY","minScore":0.9,"pageAction":"myAction"}`},
	{callback.TwoCaptcha, KindRecaptchaV3Enterprise, "https://2captcha.com/api-docs/recaptcha-v3", "userrecaptcha",
		map[string]string{"googlekey": "KEY", "pageurl": "https://site.example/", "version": "v3", "enterprise": "1", "min_score": "0.7"},
		`{"type":"RecaptchaV3TaskProxyless","websiteURL":"https://site.example/","websiteKey":"KEY","minScore":0.7,"isEnterprise":true}`},
	{callback.TwoCaptcha, KindTurnstileChallenge, "https://2captcha.com/api-docs/cloudflare-turnstile", "turnstile",
		map[string]string{"sitekey": "0x0AAAAAAADnPIDROzbs0Aaj", "pageurl": "https://2captcha.com/", "action": "managed", "data": "80001aa1affffc21",
			"pagedata": "3gAFo2l...55NDFPRFE9", "userAgent": "Mozilla/5.0 (Windows NT 10.0; Win64; x64) Chrome/131.0.0.0 Safari/537.36"},
		`{"type":"TurnstileTaskProxyless","websiteURL":"https://2captcha.com/","websiteKey":"0x0AAAAAAADnPIDROzbs0Aaj","action":"managed",
		"data":"80001aa1affffc21","pagedata":"3gAFo2l...55NDFPRFE9","userAgent":"Mozilla/5.0 (Windows NT 10.0; Win64; x64) Chrome/131.0.0.0 Safari/537.36"}`},
	{callback.TwoCaptcha, KindDataDome, "https://2captcha.com/api-docs/datadome-slider-captcha", "datadome",
		map[string]string{"pageurl": "https://www.pokemoncenter.com/", "captcha_url": "https://geo.captcha-delivery.com/captcha/?initialCid=AHrlqAAA&t=fe",
			"userAgent": "Mozilla/5.0 (Windows NT 10.0; Win64; x64) Chrome/118.0.0.0", "proxy": "user23:p4ss@203.0.113.7:3128", "proxytype": "HTTP"},
		`{"type":"DataDomeSliderTask","websiteURL":"https://www.pokemoncenter.com/","captchaUrl":"https://geo.captcha-delivery.com/captcha/?initialCid=AHrlqAAA&t=fe",
		"userAgent":"Mozilla/5.0 (Windows NT 10.0; Win64; x64) Chrome/118.0.0.0","proxyType":"http","proxyAddress":"203.0.113.7","proxyPort":3128,"proxyLogin":"user23","proxyPassword":"p4ss"}`},
	// callback.CapMonster Cloud.
	{callback.CapMonster, KindRecaptchaV2, "https://capmonster.atlassian.net/wiki/plugins/viewsource/viewpagesrc.action?pageId=425989", "userrecaptcha",
		map[string]string{"googlekey": "6Lcg7CMUAAAAANphynKgn9YAgA4tQ2KI_iqRyTwd", "pageurl": "https://lessons.zennolab.com/captchas/recaptcha/v2_simple.php?level=high"},
		`{"type":"NoCaptchaTaskProxyless","websiteURL":"https://lessons.zennolab.com/captchas/recaptcha/v2_simple.php?level=high","websiteKey":"6Lcg7CMUAAAAANphynKgn9YAgA4tQ2KI_iqRyTwd"}`},
	{callback.CapMonster, KindImage, "https://capmonster.atlassian.net/wiki/plugins/viewsource/viewpagesrc.action?pageId=425989", "base64",
		map[string]string{"body": pngB64},
		`{"type":"ImageToTextTask","body":"` + pngB64 + `"}`},
	{callback.CapMonster, KindRecaptchaV2, "https://docs.capmonster.cloud/docs/captchas/no-captcha-task", "userrecaptcha",
		map[string]string{"googlekey": "KEY", "pageurl": "https://site.example/", "proxy": "u:p@203.0.113.7:8000", "proxytype": "HTTPS"},
		`{"type":"RecaptchaV2Task","websiteURL":"https://site.example/","websiteKey":"KEY","proxyType":"https","proxyAddress":"203.0.113.7",
		"proxyPort":8000,"proxyLogin":"u","proxyPassword":"p"}`},
	{callback.CapMonster, KindTurnstile, "https://docs.capmonster.cloud/docs/captchas/tunrstile-task", "turnstile",
		map[string]string{"sitekey": "0x4AAAAAAABUYP0XeMJF0xoy", "pageurl": "http://tsmanaged.zlsupport.com"},
		`{"type":"TurnstileTask","websiteURL":"http://tsmanaged.zlsupport.com","websiteKey":"0x4AAAAAAABUYP0XeMJF0xoy"}`},
	{callback.CapMonster, KindTurnstileChallenge, "https://docs.capmonster.cloud/docs/captchas/tunrstile-task", "turnstile",
		map[string]string{"sitekey": "0x4AAAAAAADnPIDROrmt1Wwj", "pageurl": "https://site.example/", "action": "managed", "data": "CDATA",
			"pagedata": "PAGEDATA", "userAgent": "Mozilla/5.0"},
		`{"type":"TurnstileTask","websiteURL":"https://site.example/","websiteKey":"0x4AAAAAAADnPIDROrmt1Wwj","cloudflareTaskType":"token",
		"pageAction":"managed","data":"CDATA","pageData":"PAGEDATA","userAgent":"Mozilla/5.0"}`},
	{callback.CapMonster, KindCFClearance, "https://docs.capmonster.cloud/docs/captchas/tunrstile-task", "cf_clearance",
		map[string]string{"sitekey": "xxxxx", "pageurl": "https://site.example/", "html": "<html>Just a moment...</html>", "userAgent": "Mozilla/5.0",
			"proxy": "203.0.113.7:8080", "proxytype": "HTTP"},
		`{"type":"TurnstileTask","websiteURL":"https://site.example/","websiteKey":"xxxxx","cloudflareTaskType":"cf_clearance",
		"htmlPageBase64":"PGh0bWw+SnVzdCBhIG1vbWVudC4uLjwvaHRtbD4=","userAgent":"Mozilla/5.0","proxyType":"http","proxyAddress":"203.0.113.7","proxyPort":8080}`},
	{callback.CapMonster, KindDataDome, "https://docs.capmonster.cloud/docs/captchas/datadome", "datadome",
		map[string]string{"pageurl": "https://site.example/", "captcha_url": "https://geo.captcha-delivery.com/captcha/?t=fe", "cookies": "datadome:6QAEcL8c",
			"userAgent": "Mozilla/5.0", "proxy": "203.0.113.7:8080", "proxytype": "HTTP"},
		`{"type":"CustomTask","class":"DataDome","websiteURL":"https://site.example/","userAgent":"Mozilla/5.0","metadata":{"captchaUrl":
		"https://geo.captcha-delivery.com/captcha/?t=fe","datadomeCookie":"datadome=6QAEcL8c"},"proxyType":"http","proxyAddress":"203.0.113.7","proxyPort":8080}`},
	{callback.CapMonster, KindAmazonWAF, "https://docs.capmonster.cloud/docs/captchas/amazon-task", "amazon_waf",
		map[string]string{"pageurl": "https://site.example/", "sitekey": "AQIDAHjcYu", "iv": "CgAHbCe2GgAAAAAj", "context": "9BUgmlm48F92WUoqv97a49ZuEJJ50TCk9MVr3C7WMtQ0X6flVbufM4n8mjFLmbLVAPgaQ1Jydeaja94iAS49ljb",
			"challenge_script": "https://41bcdd4fb3cb.610cd090.us-east-1.token.awswaf.com/41bcdd4fb3cb/0d21de737ccb/cd77baa6c832/challenge.js"},
		`{"type":"AmazonTask","websiteURL":"https://site.example/","websiteKey":"AQIDAHjcYu","iv":"CgAHbCe2GgAAAAAj","context":"9BUgmlm48F92WUoqv97a49ZuEJJ50TCk9MVr3C7WMtQ0X6flVbufM4n8mjFLmbLVAPgaQ1Jydeaja94iAS49ljb",
		"challengeScript":"https://41bcdd4fb3cb.610cd090.us-east-1.token.awswaf.com/41bcdd4fb3cb/0d21de737ccb/cd77baa6c832/challenge.js","cookieSolution":true}`},
	// callback.CapSolver.
	{callback.CapSolver, KindMTCaptcha, "https://docs.capsolver.com/guide/captcha/MtCaptcha", "mt_captcha",
		map[string]string{"sitekey": "MTPublic-xxxxxxxxx", "pageurl": "http://www.mywebsite.com/demo", "proxy": "user:pass@198.199.100.10:3949", "proxytype": "HTTP"},
		`{"type":"MtCaptchaTask","websiteURL":"http://www.mywebsite.com/demo","websiteKey":"MTPublic-xxxxxxxxx","proxyType":"http",
		"proxyAddress":"198.199.100.10","proxyPort":3949,"proxyLogin":"user","proxyPassword":"pass"}`},
	{callback.CapSolver, KindCFClearance, "https://docs.capsolver.com/guide/captcha/cloudflare_challenge", "cf_clearance",
		map[string]string{"pageurl": "https://www.yourwebsite.com", "userAgent": "Mozilla/5.0 (Windows NT 10.0; Win64; x64) Chrome/141.0.0.0",
			"html": "<!DOCTYPE html><title>Just a moment...</title>", "proxy": "user:pass@198.199.100.10:3949", "proxytype": "HTTP"},
		`{"type":"AntiCloudflareTask","websiteURL":"https://www.yourwebsite.com","userAgent":"Mozilla/5.0 (Windows NT 10.0; Win64; x64) Chrome/141.0.0.0",
		"html":"<!DOCTYPE html><title>Just a moment...</title>","proxyType":"http","proxyAddress":"198.199.100.10","proxyPort":3949,"proxyLogin":"user","proxyPassword":"pass"}`},
	{callback.CapSolver, KindDataDome, "https://docs.capsolver.com/guide/captcha/datadome", "datadome",
		map[string]string{"pageurl": "https://bck.websiteurl.com/registry", "captcha_url": "https://geo.captcha-delivery.com/captcha/?initialCid=AHrlqAAAAAMA1QGvUmJwyYoAwpyjNg%3D%3D&t=fe",
			"userAgent": "MODERN_USER_AGENT_HERE", "proxy": "user:pass@158.120.100.23:334", "proxytype": "SOCKS5"},
		`{"type":"DatadomeSliderTask","websiteURL":"https://bck.websiteurl.com/registry","captchaUrl":"https://geo.captcha-delivery.com/captcha/?initialCid=AHrlqAAAAAMA1QGvUmJwyYoAwpyjNg%3D%3D&t=fe",
		"userAgent":"MODERN_USER_AGENT_HERE","proxyType":"socks5","proxyAddress":"158.120.100.23","proxyPort":334,"proxyLogin":"user","proxyPassword":"pass"}`},
	{callback.CapSolver, KindAmazonWAF, "https://docs.capsolver.com/guide/captcha/awsWaf", "amazon_waf",
		map[string]string{"pageurl": "https://efw47fpad9.execute-api.us-east-1.amazonaws.com/latest", "sitekey": "AQIDAHjcYu/GjX+QlghicBg......shMIKvZswZemrVVqA==",
			"iv": "CgAAFDIlckAAAAid", "context": "7DhQfG5CmoY90ZdxdHCi8WtJ3z......njNKULdcUUVOtxw=="},
		`{"type":"AntiAwsWafTaskProxyLess","websiteURL":"https://efw47fpad9.execute-api.us-east-1.amazonaws.com/latest","awsKey":"AQIDAHjcYu/GjX+QlghicBg......shMIKvZswZemrVVqA==",
		"awsIv":"CgAAFDIlckAAAAid","awsContext":"7DhQfG5CmoY90ZdxdHCi8WtJ3z......njNKULdcUUVOtxw=="}`},
	{callback.CapSolver, KindRecaptchaV2, "https://docs.capsolver.com/guide/api-use-params", "userrecaptcha",
		map[string]string{"googlekey": "6Le-wvkSAAAAAPBMRTvw0Q4Muexq9bi0DJwx_mJ-", "pageurl": "https://www.google.com/recaptcha/api2/demo",
			"proxy": "user:pass@198.199.100.10:3949", "proxytype": "HTTPS"},
		`{"type":"ReCaptchaV2Task","websiteURL":"https://www.google.com/recaptcha/api2/demo","websiteKey":"6Le-wvkSAAAAAPBMRTvw0Q4Muexq9bi0DJwx_mJ-",
		"proxyType":"https","proxyAddress":"198.199.100.10","proxyPort":3949,"proxyLogin":"user","proxyPassword":"pass"}`},
	{callback.CapSolver, KindRecaptchaV2, "https://docs.capsolver.com/zh/guide/captcha/ReCaptchaV2", "userrecaptcha",
		map[string]string{"googlekey": "6Le-wvkSAAAAAPBMRTvw0Q4Muexq9bi0DJwx_mJ-", "pageurl": "https://www.google.com/recaptcha/api2/demo", "invisible": "1"},
		`{"type":"ReCaptchaV2TaskProxyLess","websiteURL":"https://www.google.com/recaptcha/api2/demo","websiteKey":"6Le-wvkSAAAAAPBMRTvw0Q4Muexq9bi0DJwx_mJ-","isInvisible":true}`},
	{callback.CapSolver, KindRecaptchaV2Enterprise, "https://docs.capsolver.com/zh/guide/captcha/ReCaptchaV2", "userrecaptcha",
		map[string]string{"googlekey": "KEY", "pageurl": "https://store.example/", "enterprise": "1", "data-s": "2JvUXHNTnZl1Jb6WEvbDyBMzrMTR7oQ78QRhBcG07rk9bpaAaE0LRq1ZeP5NYa0N"},
		`{"type":"ReCaptchaV2EnterpriseTaskProxyLess","websiteURL":"https://store.example/","websiteKey":"KEY","enterprisePayload":{"s":"2JvUXHNTnZl1Jb6WEvbDyBMzrMTR7oQ78QRhBcG07rk9bpaAaE0LRq1ZeP5NYa0N"}}`},
	{callback.CapSolver, KindRecaptchaV3, "https://docs.capsolver.com/en/guide/captcha/ReCaptchaV3/", "userrecaptcha",
		map[string]string{"googlekey": "KEY", "pageurl": "https://site.example/", "version": "v3", "action": "login_test"},
		`{"type":"ReCaptchaV3TaskProxyLess","websiteURL":"https://site.example/","websiteKey":"KEY","pageAction":"login_test"}`},
	{callback.CapSolver, KindRecaptchaV3Enterprise, "https://docs.capsolver.com/en/guide/captcha/ReCaptchaV3/", "userrecaptcha",
		map[string]string{"googlekey": "KEY", "pageurl": "https://site.example/", "version": "v3", "enterprise": "true", "action": "login"},
		`{"type":"ReCaptchaV3EnterpriseTaskProxyLess","websiteURL":"https://site.example/","websiteKey":"KEY","pageAction":"login"}`},
	{callback.CapSolver, KindTurnstile, "https://docs.capsolver.com/guide/captcha/cloudflare_turnstile", "turnstile",
		map[string]string{"sitekey": "0x4XXXXXXXXXXXXXXXXX", "pageurl": "https://www.yourwebsite.com", "action": "login", "data": "0000-1111-2222-3333-example-cdata"},
		`{"type":"AntiTurnstileTaskProxyLess","websiteURL":"https://www.yourwebsite.com","websiteKey":"0x4XXXXXXXXXXXXXXXXX","metadata":{"action":"login","cdata":"0000-1111-2222-3333-example-cdata"}}`},
	{callback.CapSolver, KindFunCaptcha, "https://docs.capsolver.com/guide/captcha/FunCaptcha", "funcaptcha",
		map[string]string{"publickey": "xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx", "pageurl": "https://www.yourwebsite.com", "data[blob]": "flaR60YY3tnRXv6w.l32U2KgdgEUCbyoSPI4jOxU..."},
		`{"type":"FunCaptchaTaskProxyLess","websiteURL":"https://www.yourwebsite.com","websitePublicKey":"xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx","data":"{\"blob\": \"flaR60YY3tnRXv6w.l32U2KgdgEUCbyoSPI4jOxU...\"}"}`},
	{callback.CapSolver, KindImage, "https://docs.capsolver.com/zh/guide/api-createtask", "base64",
		map[string]string{"body": pngB64},
		`{"type":"ImageToTextTask","body":"` + pngB64 + `"}`},
}

// TestGoldenTaskBodies: every declared mapping builds exactly the task its documentation shows.
func TestGoldenTaskBodies(t *testing.T) {
	for _, g := range goldens {
		t.Run(fmt.Sprintf("%s/%s/%s", g.flavor, g.kind, g.method), func(t *testing.T) {
			kind, err := KindOf(g.method, g.params)
			require.NoError(t, err)
			require.Equal(t, g.kind, kind)
			spec, ok := TaskFor(g.flavor, g.kind)
			require.True(t, ok)
			sameDocs := slices.ContainsFunc(docHosts[g.flavor], func(h string) bool { return strings.HasPrefix(g.doc, h) })
			assert.Equal(t, g.doc == spec.Doc || docFamily(g.doc) == docFamily(spec.Doc) || sameDocs, true,
				"golden from %s, table cites %s", g.doc, spec.Doc)
			task, _, err := buildTask(g.flavor, g.method, g.params)
			require.NoError(t, err)
			assertSameJSON(t, g.task, task)
		})
	}
}

// TestEveryMappingHasAGolden: a table entry without a golden body has not been checked against its documentation.
func TestEveryMappingHasAGolden(t *testing.T) {
	covered := map[[2]string]bool{}
	for _, g := range goldens {
		covered[[2]string{string(g.kind), string(g.flavor)}] = true
	}
	for kind, byFlavor := range taskTable {
		for flavor := range byFlavor {
			assert.True(t, covered[[2]string{string(kind), string(flavor)}], "%s/%s has no golden body", flavor, kind)
		}
	}
}

// docFamily is a doc URL's host: a golden may come from another page of the same documentation (the createTask
// method page's example for a task type, say).
func docFamily(u string) string {
	var host string
	_, _ = fmt.Sscanf(u, "https://%s", &host)
	for i, c := range host {
		if c == '/' {
			return host[:i]
		}
	}
	return host
}

// assertSameJSON compares a task with the documented body as JSON values; a string field that holds JSON
// (FunCaptcha's data) is compared as the JSON it holds, since the docs space it freely.
func assertSameJSON(t *testing.T, want string, task map[string]any) {
	t.Helper()
	got, err := json.Marshal(task)
	require.NoError(t, err)
	var w, g any
	require.NoError(t, json.Unmarshal([]byte(want), &w))
	require.NoError(t, json.Unmarshal(got, &g))
	if !reflect.DeepEqual(normalize(w), normalize(g)) {
		t.Fatalf("task body\n got %s\nwant %s", got, want)
	}
}

func normalize(v any) any {
	switch x := v.(type) {
	case map[string]any:
		out := map[string]any{}
		for k, e := range x {
			out[k] = normalize(e)
		}
		return out
	case string:
		var inner map[string]any
		if json.Unmarshal([]byte(x), &inner) == nil {
			return normalize(inner)
		}
	}
	return v
}
